// layerperf report: the timeline's input. Wheel zooms about the pointer, drag (or shift+wheel) pans,
// the overview strip picks a stretch, keys and buttons zoom and pan, a click selects the call's layer
// in the table, the runs strip draws the run clicked (timeline.js draws).
(function (Timeline) {
  "use strict";
  var LEFT = Timeline.LEFT;

  Timeline.prototype.bind = function () {
    var self = this, cv = this.canvas, drag = null;
    cv.addEventListener("wheel", function (e) {
      var at = self.local(e, cv);
      e.preventDefault();
      if (e.shiftKey || Math.abs(e.deltaX) > Math.abs(e.deltaY)) {
        self.pan((e.deltaX || e.deltaY) / self.scale); return;
      }
      self.zoom(Math.exp(e.deltaY * 0.0018), at.x);
    }, {passive: false});
    cv.addEventListener("mousedown", function (e) {
      drag = {x: e.clientX, view: self.view.slice(), moved: false};
      e.preventDefault();
    });
    window.addEventListener("mousemove", function (e) {
      if (!drag) { return; }
      var dx = e.clientX - drag.x;
      if (Math.abs(dx) > 2) { drag.moved = true; }
      if (drag.moved) { self.setView(drag.view[0] - dx / self.scale, drag.view[1] - dx / self.scale); }
    });
    window.addEventListener("mouseup", function (e) {
      if (!drag) { return; }
      var moved = drag.moved;
      drag = null;
      if (moved || e.target !== cv) { return; }
      var at = self.local(e, cv), hit = self.find(at.x, at.y);
      self.picked = hit; self.schedule();
      if (hit) {
        var p = self.part, row = hit.gpu ? p.kernels.own[hit.i] : hit.i;
        if (row >= 0 && self.select) { self.select("name", self.data.names[p.calls.n[row]]); }
      }
    });
    cv.addEventListener("mousemove", function (e) {
      if (drag && drag.moved) { return; }
      var at = self.local(e, cv), hit = self.find(at.x, at.y);
      var same = hit && self.hover && hit.gpu === self.hover.gpu && hit.i === self.hover.i;
      if (!same) { self.hover = hit; self.schedule(); }
      self.showTip(e, hit ? self.describe(hit) : null);
    });
    cv.addEventListener("mouseleave", function () { self.hover = null; self.showTip(null, null); self.schedule(); });
    cv.addEventListener("dblclick", function () { self.setView(0, self.full); });
    cv.addEventListener("keydown", function (e) {
      var span = self.view[1] - self.view[0], key = e.key.toLowerCase();
      var acts = {w: function () { self.zoom(0.7); }, s: function () { self.zoom(1 / 0.7); },
        a: function () { self.pan(-span * 0.2); }, d: function () { self.pan(span * 0.2); },
        "0": function () { self.setView(0, self.full); }};
      if (acts[key]) { e.preventDefault(); acts[key](); }
    });
    this.bindOverview();
    Array.prototype.forEach.call(this.root.querySelectorAll("button[data-act]"), function (b) {
      b.addEventListener("click", function () {
        var act = b.getAttribute("data-act");
        if (act === "in") { self.zoom(0.5); } else if (act === "out") { self.zoom(2); } else { self.setView(0, self.full); }
      });
    });
    Array.prototype.forEach.call(this.root.querySelectorAll(".tl-strip [data-run]"), function (el) {
      el.addEventListener("click", function () {
        var run = Number(el.getAttribute("data-run"));
        if (!self.show(run) && self.label) {
          self.label.textContent = self.data.noun + " " + (run + 1) + " is not held in this page (it keeps " +
            self.data.parts.length + " of " + self.data.runs.dur.length + "): " + self.data.noun + " " + (self.run + 1) + " shown";
        }
      });
    });
    window.addEventListener("resize", function () { self.schedule(); });
  };

  Timeline.prototype.bindOverview = function () {
    var self = this, ov = this.over, drag = null;
    if (!ov) { return; }
    function at(e) { return (self.local(e, ov).x - LEFT) / (ov.clientWidth - LEFT - 8) * self.full; }
    ov.addEventListener("mousedown", function (e) { drag = at(e); e.preventDefault(); });
    window.addEventListener("mousemove", function (e) {
      if (drag === null) { return; }
      var t = at(e);
      if (Math.abs(t - drag) * (ov.clientWidth - LEFT) / self.full > 3) { self.setView(Math.min(drag, t), Math.max(drag, t)); }
    });
    window.addEventListener("mouseup", function (e) {
      if (drag === null) { return; }
      var t = at(e), span = self.view[1] - self.view[0];
      if (Math.abs(t - drag) * (ov.clientWidth - LEFT) / self.full <= 3) { self.setView(t - span / 2, t + span / 2); }
      drag = null;
    });
  };
}(LayerperfTimeline.Timeline));
