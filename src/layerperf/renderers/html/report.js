// layerperf report: sorting, filtering, exact selection from the charts, tooltips, the timeline. Data
// comes from the JSON block and goes into the page as text (textContent, attributes), never as markup.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var filter = document.getElementById("filter");
  var counter = document.getElementById("row-count");
  var chip = document.getElementById("selection");
  var states = [];
  var selection = null;  // {kind: "type" | "name", value}: rows whose op type (family) or name is exactly it

  function compare(a, b, numeric) {
    if (numeric) { return a - b; }
    return String(a).localeCompare(String(b));
  }

  function sortBy(state, th) {
    var key = th.getAttribute("data-key");
    var col = state.spec.keys.indexOf(key);
    if (col < 0) { return; }
    var ascending = state.key === key ? !state.ascending : true;
    var numeric = state.spec.numeric[col];
    var rows = state.spec.rows;
    var order = state.trs.map(function (_, i) { return i; });
    order.sort(function (i, j) {
      var a = rows[i][col], b = rows[j][col];
      var na = a === null || a === undefined, nb = b === null || b === undefined;
      if (na || nb) { return na === nb ? i - j : (na ? 1 : -1); }  // unknown last, either way
      var c = compare(a, b, numeric);
      if (c === 0 || c !== c) { return i - j; }
      return ascending ? c : -c;
    });
    var frag = document.createDocumentFragment();
    order.forEach(function (i) { frag.appendChild(state.trs[i]); });
    state.body.appendChild(frag);
    state.key = key;
    state.ascending = ascending;
    state.ths.forEach(function (h) {
      if (h === th) { h.setAttribute("aria-sort", ascending ? "ascending" : "descending"); }
      else { h.removeAttribute("aria-sort"); }
    });
  }

  function selected(state, i) {
    if (!selection) { return true; }
    if (selection.kind === "name") { return state.spec.names[i] === selection.value; }
    return state.spec.groups[i] === selection.value;
  }

  function applyFilter() {
    var text = filter ? filter.value.trim().toLowerCase() : "";
    states.forEach(function (state, n) {
      if (state.spec.filtered === false) { return; }
      var shown = 0;
      state.trs.forEach(function (tr, i) {
        var hit = selected(state, i) && (!text || state.names[i].indexOf(text) >= 0 || state.types[i].indexOf(text) >= 0);
        if (hit) { tr.removeAttribute("hidden"); shown += 1; } else { tr.setAttribute("hidden", ""); }
      });
      if (n === 0 && counter) {
        counter.textContent = shown + " of " + state.trs.length + " " + state.spec.noun;
      }
    });
    if (chip) {
      chip.hidden = !selection;
      var label = chip.querySelector(".what");
      if (label && selection) { label.textContent = (selection.kind === "name" ? "name = " : "type = ") + selection.value; }
    }
  }

  function select(kind, value) {
    selection = value === null ? null : {kind: kind, value: value};
    applyFilter();
    var box = document.querySelector(".filter");
    if (box && value !== null) { box.scrollIntoView({block: "center"}); }
  }

  Object.keys(data.tables || {}).forEach(function (id) {
    var table = document.getElementById(id);
    if (!table || !table.tBodies.length) { return; }
    var spec = data.tables[id];
    var state = {
      spec: spec, body: table.tBodies[0], trs: Array.prototype.slice.call(table.tBodies[0].rows),
      ths: Array.prototype.slice.call(table.tHead.rows[0].cells), key: null, ascending: true,
      names: spec.names.map(function (s) { return s.toLowerCase(); }),
      types: spec.types.map(function (s) { return s.toLowerCase(); })
    };
    state.ths.forEach(function (th) {
      th.addEventListener("click", function () { sortBy(state, th); });
      th.addEventListener("keydown", function (e) {
        if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sortBy(state, th); }
      });
    });
    states.push(state);
  });

  if (filter) { filter.addEventListener("input", applyFilter); }
  if (chip) {
    var clear = chip.querySelector("button");
    if (clear) { clear.addEventListener("click", function () { select(null, null); }); }
  }

  // a chart element naming an op type (data-type) or a layer (data-name) selects exactly those rows;
  // one that folds others away (data-expand) shows the chart it stands for instead
  function pick(e) {
    var el = e.target;
    while (el && el.getAttribute) {
      var expand = el.getAttribute("data-expand");
      if (expand) {
        var other = document.getElementById(expand), here = el.closest(".swap");
        if (other && here) { here.hidden = true; other.hidden = false; }
        return;
      }
      var type = el.getAttribute("data-type");
      if (type !== null) { select("type", type); return; }
      var name = el.closest && el.closest("svg") ? el.getAttribute("data-name") : null;
      if (name !== null) { select("name", name); return; }
      el = el.parentNode;
    }
  }
  Array.prototype.forEach.call(document.querySelectorAll("svg.chart"), function (svg) {
    svg.addEventListener("click", pick);
  });

  // a small tooltip for chart elements: their <title> text, shown at once where the pointer is
  var tip = document.getElementById("tip");
  function showTip(e) {
    var el = e.target, title = null;
    while (el && el.tagName && el.tagName.toLowerCase() !== "svg") {
      var t = el.querySelector && el.querySelector(":scope > title");
      if (t) { title = t.textContent; break; }
      el = el.parentNode;
    }
    if (!tip) { return; }
    if (!title) { tip.hidden = true; return; }
    tip.textContent = title;
    tip.hidden = false;
    var x = Math.min(e.clientX + 14, window.innerWidth - tip.offsetWidth - 8);
    var y = e.clientY + 16;
    if (y + tip.offsetHeight > window.innerHeight - 4) { y = e.clientY - tip.offsetHeight - 10; }
    tip.style.left = x + "px";
    tip.style.top = y + "px";
  }
  Array.prototype.forEach.call(document.querySelectorAll("svg.chart"), function (svg) {
    svg.addEventListener("mousemove", showTip);
    svg.addEventListener("mouseleave", function () { if (tip) { tip.hidden = true; } });
  });

  // a heading a nav link jumps to lands below the sticky header, however tall the header wraps
  var header = document.querySelector("header");
  function headerHeight() {
    if (header) { document.documentElement.style.setProperty("--header-h", header.offsetHeight + "px"); }
  }
  headerHeight();
  window.addEventListener("resize", headerHeight);

  window.layerperfTimelines = LayerperfTimeline.start(data.timelines, tip, select);
  applyFilter();
  document.body.dataset.readyMs = String(Math.round(performance.now()));
  document.body.dataset.ready = "1";
}());
