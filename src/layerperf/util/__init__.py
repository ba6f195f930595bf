"""Small helpers every stage uses: atomic files, figures with units, handing memory back."""
