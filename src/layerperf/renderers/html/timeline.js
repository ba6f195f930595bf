// layerperf report: the timeline, drawn on a canvas from the page's data (gantt.py writes it); the
// overview strip shows the window; every call is drawn at any zoom (one narrower than a pixel colours
// that pixel). timeline_input.js moves the view. Text goes in as textContent only.
var LayerperfTimeline = (function () {
  "use strict";
  var ROW = 16, GAP = 8, LEFT = 160, AXIS = 22, TRACK = 34, OVER_H = 46, MIN_SPAN = 200;

  function decode(part) {  // a run's calls (and kernels) as typed arrays, rows located
    function times(p) {
      var n = p.t.length, s = new Float64Array(n), d = new Float64Array(n), acc = 0;
      for (var i = 0; i < n; i++) { acc += p.t[i]; s[i] = acc; d[i] = p.d[i]; }
      var rows = {}, key = -1;
      for (i = 0; i < n; i++) {
        var k = p.l[i] * 4096 + p.z[i];
        if (k !== key) { rows[k] = {from: i, to: i + 1, lane: p.l[i], depth: p.z[i]}; key = k; } else { rows[k].to = i + 1; }
      }
      return {start: s, dur: d, n: p.n, lane: p.l, depth: p.z, rows: rows, count: n};
    }
    var out = {calls: times(part.calls), kernels: part.kernels ? times(part.kernels) : null, counters: part.counters || {}};
    if (out.kernels) {
      out.kernels.kind = part.kernels.k; out.kernels.src = part.kernels.src; out.kernels.own = part.kernels.own;
      out.byCall = {};
      for (var i = 0; i < out.kernels.count; i++) {
        [part.kernels.src[i], part.kernels.own[i]].forEach(function (c) {
          if (c >= 0) { (out.byCall[c] = out.byCall[c] || []).indexOf(i) < 0 && out.byCall[c].push(i); }
        });
      }
    }
    return out;
  }

  function fmtNs(ns) {
    var a = Math.abs(ns);
    if (a >= 1e9) { return (ns / 1e9).toPrecision(4) + " s"; }
    if (a >= 1e6) { return (ns / 1e6).toPrecision(4) + " ms"; }
    if (a >= 1e3) { return (ns / 1e3).toPrecision(4) + " µs"; }
    return Math.round(ns) + " ns";
  }

  function tickStep(span, target) {
    var raw = Math.max(span, 1) / target, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    var steps = [1, 2, 5, 10];
    for (var i = 0; i < steps.length; i++) { if (steps[i] * mag >= raw) { return steps[i] * mag; } }
    return 10 * mag;
  }

  function tickLabel(ns, step) {  // as few digits as the step needs, in the step's unit
    var units = [[1e9, "s"], [1e6, "ms"], [1e3, "µs"], [1, "ns"]];
    for (var i = 0; i < units.length; i++) {
      if (step >= units[i][0] / 10 || i === units.length - 1) {
        var v = ns / units[i][0], digits = Math.max(0, Math.ceil(-Math.log10(step / units[i][0]) + 1e-9));
        return (ns === 0 ? "0" : v.toFixed(Math.min(digits, 6))) + " " + units[i][1];
      }
    }
    return String(ns);
  }

  function candidates(ctx, name) {  // the name, then its tails cut at separators, each with its width
    var out = [[name, ctx.measureText(name).width]], re = /[\/.]|::/g, m;
    while ((m = re.exec(name)) !== null) {
      var tail = "…" + name.slice(m.index + m[0].length);
      if (tail.length > 1) { out.push([tail, ctx.measureText(tail).width]); }
    }
    return out;
  }

  function fitLabel(cands, width) {  // the longest candidate that fits, else the leaf cut short (by its mean glyph)
    if (width < 14) { return ""; }
    for (var i = 0; i < cands.length; i++) { if (cands[i][1] <= width) { return cands[i][0]; } }
    var leaf = cands[cands.length - 1], text = leaf[0].charAt(0) === "…" ? leaf[0].slice(1) : leaf[0];
    var n = Math.floor(width / (leaf[1] / Math.max(leaf[0].length, 1))) - 1;
    return n > 0 ? text.slice(0, n) + "…" : "";
  }

  function leafLabel(ctx, name, width) {  // the longest tail of the path that fits, cut at a separator
    return fitLabel(candidates(ctx, name), width);
  }

  function labelName(name, type) {  // a name without the tail that only names its op or a runtime's fusion
    var parts = name.split(/(\/|\.|::)/), strip = /^$|Fusion$|^(\/|\.|::)$/;
    while (parts.length > 1 && (strip.test(parts[parts.length - 1]) || parts[parts.length - 1] === type)) { parts.pop(); }
    return parts.join("") || name;
  }

  function Timeline(root, data, tip, select) {
    this.root = root; this.data = data; this.tip = tip; this.select = select;
    this.labels = data.names.map(function (name, i) { return labelName(name, data.types[data.ntype[i]]); });
    this.canvas = root.querySelector("canvas.tl-main");
    this.over = root.querySelector("canvas.tl-over");
    this.label = root.querySelector(".tl-view");
    this.cache = {};
    this.hover = null; this.picked = null;
    this.show(data.runs.drawn);
    this.bind();
  }

  Timeline.prototype.partOf = function (run) {
    var parts = this.data.parts;
    for (var i = 0; i < parts.length; i++) { if (parts[i].run === run) { return i; } }
    return -1;
  };

  Timeline.prototype.show = function (run) {
    var at = this.partOf(run);
    if (at < 0) { return false; }
    this.run = run;
    this.part = this.cache[run] || (this.cache[run] = decode(this.data.parts[at]));
    this.span = this.data.runs.dur[run] || 1;
    var full = Math.max(this.span, this.data.scale || 0);
    this.full = full;
    this.view = [0, full];
    this.hover = null; this.picked = null;
    this.layout();
    this.root.dataset.run = String(run);
    this.root.dataset.calls = String(this.part.calls.count);
    this.root.dataset.kernels = String(this.part.kernels ? this.part.kernels.count : 0);
    Array.prototype.forEach.call(this.root.querySelectorAll(".tl-strip [data-run]"), function (el) {
      el.classList.toggle("drawn", Number(el.getAttribute("data-run")) === run);
    });
    this.draw();
    return true;
  };

  Timeline.prototype.layout = function () {  // lanes of this run: y of each (lane, depth) row
    var lanes = {}, p = this.part, lanesDoc = this.data.lanes;
    [p.calls, p.kernels].forEach(function (t) {
      if (!t) { return; }
      Object.keys(t.rows).forEach(function (k) {
        var r = t.rows[k];
        lanes[r.lane] = Math.max(lanes[r.lane] || 0, r.depth + 1);
      });
    });
    var order = Object.keys(lanes).map(Number).sort(function (a, b) {
      return (lanesDoc[a].gpu - lanesDoc[b].gpu) || (a - b);
    });
    var y = AXIS, top = {};
    this.lanes = order.map(function (l) {
      var lane = {lane: l, y: y, depth: lanes[l], name: lanesDoc[l].name, gpu: lanesDoc[l].gpu};
      top[l] = y; y += lanes[l] * ROW + GAP; return lane;
    });
    this.top = top;
    this.tracks = (this.data.counters || []).filter(function (c) { return p.counters[c.label]; }).map(function (c) {
      var values = p.counters[c.label], top = 0, calls = p.calls;
      for (var i = 0; i < calls.count; i++) {  // the run's highest rate: the track's full height
        if (calls.depth[i] === 0 && values[i] !== null && calls.dur[i] > 0) { top = Math.max(top, values[i] / calls.dur[i]); }
      }
      var scale = c.unit === "time" ? "top: " + top.toFixed(2) + " CPUs busy" : "top: " + (top * 1e3).toPrecision(3) + " per µs";
      var t = {label: c.label, header: c.header, unit: c.unit, y: y, top: top, scale: scale}; y += TRACK; return t;
    });
    this.height = y + 4;
    this.root.dataset.lanes = this.lanes.map(function (l) { return l.name; }).join("\n");
  };

  Timeline.prototype.resize = function (canvas, height) {
    var dpr = window.devicePixelRatio || 1, width = canvas.parentNode.clientWidth || 1000;
    if (canvas.width !== Math.round(width * dpr) || canvas.height !== Math.round(height * dpr)) {
      canvas.width = Math.round(width * dpr); canvas.height = Math.round(height * dpr);
      canvas.style.width = width + "px"; canvas.style.height = height + "px";
    }
    var ctx = canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    return {ctx: ctx, width: width};
  };

  Timeline.prototype.x = function (t) { return LEFT + (t - this.view[0]) * this.scale; };
  Timeline.prototype.t = function (x) { return this.view[0] + (x - LEFT) / this.scale; };

  Timeline.prototype.schedule = function () {
    var self = this;
    if (this.pending) { return; }
    this.pending = window.requestAnimationFrame(function () { self.pending = 0; self.draw(); });
  };

  Timeline.prototype.draw = function () {
    var began = performance.now(), c = this.resize(this.canvas, this.height), ctx = c.ctx, width = c.width;
    this.width = width;
    this.scale = (width - LEFT - 8) / (this.view[1] - this.view[0]);
    ctx.clearRect(0, 0, width, this.height);
    ctx.font = "11px system-ui, sans-serif";
    this.axis(ctx, width);
    var drawn = 0, self = this;
    this.lanes.forEach(function (lane, i) {
      ctx.fillStyle = i % 2 ? "#ffffff" : "#f6f6f8";
      ctx.fillRect(0, lane.y - 2, width, lane.depth * ROW + 4);
    });
    drawn += this.rows(ctx, this.part.calls, false);
    if (this.part.kernels) { this.rows(ctx, this.part.kernels, true); }
    this.counterTracks(ctx, width);
    this.flows(ctx);
    ctx.clearRect(0, AXIS - 2, LEFT - 4, this.height);
    this.lanes.forEach(function (lane) {
      ctx.fillStyle = lane.gpu ? "#2f6fb3" : "#1d1d1f";
      ctx.fillText(leafLabel(ctx, lane.name, LEFT - 12), 6, lane.y + 11);
    });
    this.tracks.forEach(function (t) {
      ctx.fillStyle = "#5f6368";
      ctx.fillText(leafLabel(ctx, t.header, LEFT - 12), 6, t.y + 12);
      ctx.fillText(leafLabel(ctx, t.scale, LEFT - 12), 6, t.y + 25);
    });
    this.root.dataset.drawn = String(drawn);
    this.root.dataset.viewStart = String(Math.round(this.view[0]));
    this.root.dataset.viewEnd = String(Math.round(this.view[1]));
    if (this.label) {
      this.label.textContent = fmtNs(this.view[0]) + " – " + fmtNs(this.view[1]) + " of " + this.data.noun + " " +
        (this.run + 1) + " (" + fmtNs(this.span) + ")" + (this.part.calls.count ? ", " + this.part.calls.count +
        " calls" : "") + (this.part.kernels ? ", " + this.part.kernels.count + " device activities" : "");
    }
    self.overview();
    this.root.dataset.drawMs = (performance.now() - began).toFixed(1);  // the last redraw's cost, for benchmarks
  };

  Timeline.prototype.axis = function (ctx, width) {
    var span = this.view[1] - this.view[0], step = tickStep(span, Math.max(2, Math.floor((width - LEFT) / 110)));
    ctx.fillStyle = "#5f6368"; ctx.strokeStyle = "#e6e6ea";
    for (var t = Math.ceil(this.view[0] / step) * step; t <= this.view[1]; t += step) {
      var x = this.x(t);
      ctx.beginPath(); ctx.moveTo(x + 0.5, AXIS - 4); ctx.lineTo(x + 0.5, this.height); ctx.stroke();
      ctx.fillText(tickLabel(t, step), x + 3, 12);
    }
  };

  Timeline.prototype.colorOf = function (t, i, gpu) {
    if (gpu) { return this.data.kcolors[t.kind[i]]; }
    return this.data.colors[this.data.ntype[t.n[i]]];
  };

  Timeline.prototype.candidatesOf = function (ctx, n, gpu) {  // measured once per name: a redraw measures nothing
    var cache = gpu ? (this.kcands = this.kcands || {}) : (this.cands = this.cands || {});
    if (!cache[n]) { cache[n] = candidates(ctx, gpu ? this.data.kshort[n] : this.labels[n]); }
    return cache[n];
  };

  Timeline.prototype.rows = function (ctx, t, gpu) {  // every call of every row in view; returns calls drawn
    var self = this, drawn = 0, v0 = this.view[0], v1 = this.view[1], far = this.data.far;
    Object.keys(t.rows).forEach(function (key) {
      var r = t.rows[key], y = self.top[r.lane] + r.depth * ROW, lo = r.from, hi = r.to;
      while (lo < hi) {  // the first call ending after the view starts (ends grow with starts in a row)
        var mid = (lo + hi) >> 1;
        if (t.start[mid] + t.dur[mid] < v0) { lo = mid + 1; } else { hi = mid; }
      }
      var lastPx = -1;
      for (var i = lo; i < r.to; i++) {
        var s = t.start[i];
        if (s > v1) { break; }
        var x0 = self.x(s), x1 = self.x(s + t.dur[i]), w = x1 - x0;
        drawn += 1;
        if (w < 1) {
          var px = Math.floor(Math.max(x0, LEFT));
          if (px <= lastPx) { continue; }
          ctx.fillStyle = self.colorOf(t, i, gpu);
          ctx.fillRect(px, y, 1, ROW - 2); lastPx = px; continue;
        }
        var left = Math.max(x0, LEFT - 1), right = Math.min(x1, self.width);
        ctx.fillStyle = self.colorOf(t, i, gpu);
        ctx.fillRect(left, y, Math.max(right - left - 0.5, 1), ROW - 2);
        lastPx = Math.floor(right);
        var med = gpu ? 0 : self.data.medians[t.n[i]];
        if (med && t.dur[i] >= far * med) {  // far from its median: a red mark on its top edge
          ctx.fillStyle = "#d62728"; ctx.fillRect(left, y, Math.max(right - left - 0.5, 1), 3);
        }
        if (right - left > 24) {
          var text = fitLabel(self.candidatesOf(ctx, t.n[i], gpu), right - left - 6);
          if (text) { ctx.fillStyle = "#111"; ctx.fillText(text, left + 3, y + 11); }
        }
      }
    });
    return drawn;
  };

  Timeline.prototype.counterTracks = function (ctx) {  // each call's count over its duration: a rate
    var self = this, p = this.part, t = p.calls;
    this.tracks.forEach(function (track) {
      var values = p.counters[track.label], top = track.top, i;
      ctx.strokeStyle = "#d9d9de"; ctx.beginPath(); ctx.moveTo(LEFT, track.y + TRACK - 3.5);
      ctx.lineTo(self.width, track.y + TRACK - 3.5); ctx.stroke();
      if (!top) { return; }
      for (i = 0; i < t.count; i++) {
        if (t.depth[i] !== 0 || values[i] === null || t.start[i] > self.view[1] || t.start[i] + t.dur[i] < self.view[0]) { continue; }
        var x0 = Math.max(self.x(t.start[i]), LEFT), x1 = Math.min(self.x(t.start[i] + t.dur[i]), self.width);
        var h = (TRACK - 6) * (values[i] / t.dur[i]) / top;
        ctx.fillStyle = self.colorOf(t, i, false);
        ctx.fillRect(x0, track.y + TRACK - 4 - h, Math.max(x1 - x0, 1), h);
      }
    });
  };

  Timeline.prototype.center = function (t, i, gpu) {
    var r = {x: this.x(t.start[i]), y: this.top[t.lane[i]] + t.depth[i] * ROW};
    return gpu ? r : {x: r.x, y: r.y + ROW - 2};
  };

  Timeline.prototype.flows = function (ctx) {  // arrows from the launching call to each kernel of the hovered item
    var p = this.part, k = p.kernels, focus = this.hover || this.picked, self = this;
    if (!k || !focus) { return; }
    var list = focus.gpu ? [focus.i] : (p.byCall[focus.i] || []);
    ctx.strokeStyle = "#d62728"; ctx.fillStyle = "#d62728"; ctx.lineWidth = 1.2;
    list.forEach(function (j) {
      var from = k.src[j] >= 0 ? k.src[j] : k.own[j];
      if (from < 0) { return; }
      var a = self.center(p.calls, from, false), b = self.center(k, j, true);
      ctx.beginPath(); ctx.moveTo(a.x, a.y); ctx.bezierCurveTo(a.x, (a.y + b.y) / 2, b.x, (a.y + b.y) / 2, b.x, b.y);
      ctx.stroke();
      ctx.beginPath(); ctx.moveTo(b.x, b.y); ctx.lineTo(b.x - 4, b.y - 6); ctx.lineTo(b.x + 4, b.y - 6); ctx.fill();
    });
    ctx.lineWidth = 1;
    this.root.dataset.flows = String(list.length);
  };

  Timeline.prototype.overview = function () {  // the run's picture (drawn once per run and size), then the window
    if (!this.over) { return; }
    var c = this.resize(this.over, OVER_H), ctx = c.ctx, width = c.width, dpr = window.devicePixelRatio || 1;
    var key = this.run + ":" + width + ":" + dpr;
    if (this.overKey !== key) { this.overImage = this.overviewImage(width, dpr); this.overKey = key; }
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.clearRect(0, 0, this.over.width, this.over.height);
    ctx.drawImage(this.overImage, 0, 0);
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    var sx = (width - LEFT - 8) / this.full, x0 = LEFT + this.view[0] * sx, x1 = LEFT + this.view[1] * sx;
    ctx.fillStyle = "rgba(47,111,179,0.14)"; ctx.fillRect(x0, 0, Math.max(x1 - x0, 2), OVER_H);
    ctx.strokeStyle = "#2f6fb3"; ctx.strokeRect(x0 + 0.5, 0.5, Math.max(x1 - x0, 2), OVER_H - 1);
  };

  Timeline.prototype.overviewImage = function (width, dpr) {  // every call of the run, squeezed to the strip
    var img = document.createElement("canvas"), ctx, self = this;
    img.width = Math.round(width * dpr); img.height = Math.round(OVER_H * dpr);
    ctx = img.getContext("2d"); ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    var sx = (width - LEFT - 8) / this.full, rows = this.lanes.reduce(function (n, l) { return n + l.depth; }, 0) || 1;
    var h = (OVER_H - 6) / rows;
    ctx.fillStyle = "#f6f6f8"; ctx.fillRect(LEFT, 0, width - LEFT - 8, OVER_H);
    ctx.fillStyle = "#5f6368"; ctx.font = "11px system-ui, sans-serif"; ctx.fillText("overview: drag to pick", 6, 26);
    var base = {}, y = 3;
    this.lanes.forEach(function (l) { base[l.lane] = y; y += l.depth * h; });
    [[this.part.calls, false], [this.part.kernels, true]].forEach(function (pair) {
      var t = pair[0];
      if (!t) { return; }
      for (var i = 0; i < t.count; i++) {
        ctx.fillStyle = self.colorOf(t, i, pair[1]);
        ctx.fillRect(LEFT + t.start[i] * sx, base[t.lane[i]] + t.depth[i] * h, Math.max(t.dur[i] * sx, 0.5), Math.max(h - 0.5, 0.5));
      }
    });
    return img;
  };

  Timeline.prototype.setView = function (t0, t1) {
    var span = Math.min(Math.max(t1 - t0, MIN_SPAN), this.full);
    t0 = Math.min(Math.max(t0, 0), this.full - span);
    this.view = [t0, t0 + span];
    this.schedule();
  };

  Timeline.prototype.zoom = function (factor, atX) {
    var at = atX === undefined ? (this.view[0] + this.view[1]) / 2 : this.t(atX);
    this.setView(at - (at - this.view[0]) * factor, at + (this.view[1] - at) * factor);
  };

  Timeline.prototype.pan = function (ns) { this.setView(this.view[0] + ns, this.view[1] + ns); };

  Timeline.prototype.find = function (x, y) {  // the call (or kernel) under a point, if any
    var p = this.part, t = this.t(x), tol = 3 / this.scale, self = this, hit = null;
    if (x < LEFT) { return null; }
    [[p.calls, false], [p.kernels, true]].forEach(function (pair) {
      var tab = pair[0];
      if (!tab || hit) { return; }
      Object.keys(tab.rows).forEach(function (key) {
        var r = tab.rows[key], top = self.top[r.lane] + r.depth * ROW;
        if (hit || y < top || y >= top + ROW) { return; }
        var lo = r.from, hi = r.to;
        while (lo < hi) { var mid = (lo + hi) >> 1; if (tab.start[mid] + tab.dur[mid] < t - tol) { lo = mid + 1; } else { hi = mid; } }
        if (lo < r.to && tab.start[lo] <= t + tol) { hit = {gpu: pair[1], i: lo}; }
      });
    });
    return hit;
  };

  Timeline.prototype.describe = function (hit) {
    var p = this.part, d = this.data;
    if (hit.gpu) {
      var k = p.kernels, i = hit.i, from = k.src[i] >= 0 ? k.src[i] : k.own[i];
      return d.knames[k.n[i]] + "\n" + d.kinds[k.kind[i]] + " on " + d.lanes[k.lane[i]].name + ": " + fmtNs(k.dur[i]) +
        ", starts at " + fmtNs(k.start[i]) + (k.own[i] >= 0 ? "\ndevice time of " + d.names[p.calls.n[k.own[i]]] : "") +
        (from >= 0 ? "\nlaunched by " + d.names[p.calls.n[from]] + " at " + fmtNs(p.calls.start[from]) : "");
    }
    var c = p.calls, j = hit.i, med = d.medians[c.n[j]], name = d.names[c.n[j]];
    var ratio = med ? c.dur[j] / med : 0, lines = [name, d.types[d.ntype[c.n[j]]] + ": " + fmtNs(c.dur[j]) +
      ", starts at " + fmtNs(c.start[j]) + (c.depth[j] ? ", nested " + c.depth[j] + " deep" : "")];
    if (med) {
      lines.push("median of its calls " + fmtNs(med) + (ratio >= d.far ? " — this call x" + ratio.toFixed(1) +
        " its median (marked: at least x" + d.far + ")" : " (this call x" + ratio.toFixed(2) + ")"));
    }
    (d.counters || []).forEach(function (cnt) {
      var v = p.counters[cnt.label] && p.counters[cnt.label][j];
      if (v !== null && v !== undefined) { lines.push(cnt.header + ": " + (cnt.unit === "time" ? fmtNs(v) : v.toLocaleString("en-US"))); }
    });
    var ks = p.byCall ? (p.byCall[j] || []).length : 0;
    if (ks) { lines.push(ks + " device activities linked (arrows)"); }
    return lines.join("\n");
  };

  Timeline.prototype.boxes = function () {  // where each call and kernel of the drawn run is, in CSS pixels of
    // the canvas (x before the lane names' margin when the view starts later): what the page drew, for tests
    var p = this.part, d = this.data, self = this, out = [];
    [[p.calls, false], [p.kernels, true]].forEach(function (pair) {
      var t = pair[0];
      if (!t) { return; }
      for (var i = 0; i < t.count; i++) {
        var y = self.top[t.lane[i]] + t.depth[i] * ROW;
        out.push({name: pair[1] ? d.knames[t.n[i]] : d.names[t.n[i]], gpu: pair[1], lane: d.lanes[t.lane[i]].name,
          depth: t.depth[i], x0: self.x(t.start[i]), x1: self.x(t.start[i] + t.dur[i]), y0: y, y1: y + ROW - 2});
      }
    });
    return out;
  };

  Timeline.prototype.showTip = function (e, text) {
    var tip = this.tip;
    if (!tip) { return; }
    if (!text) { tip.hidden = true; return; }
    tip.textContent = text; tip.hidden = false;
    var x = Math.min(e.clientX + 14, window.innerWidth - tip.offsetWidth - 8), y = e.clientY + 16;
    if (y + tip.offsetHeight > window.innerHeight - 4) { y = e.clientY - tip.offsetHeight - 10; }
    tip.style.left = x + "px"; tip.style.top = y + "px";
  };

  Timeline.prototype.local = function (e, el) {
    var r = el.getBoundingClientRect();
    return {x: e.clientX - r.left, y: e.clientY - r.top};
  };

  Timeline.LEFT = LEFT;  // timeline_input.js maps the pointer with it
  return {
    Timeline: Timeline,
    start: function (data, tip, select) {
      var made = {};
      Object.keys(data || {}).forEach(function (id) {
        var root = document.getElementById(id);
        if (root && data[id].parts.length) { made[id] = new Timeline(root, data[id], tip, select); }
      });
      return made;
    }
  };
}());
