// wanlab report plotter: draws WANLAB_GRAPHS on canvases. Mouse wheel
// zooms time around the pointer, drag pans, double-click resets; graphs of
// one group (a connection's direction; with "zoom captures together", the
// same flow in every capture of the page, aligned by capture start time)
// share their time window, kept in page time: seconds since the page's
// earliest capture start (a graph's own times plus its offset). Points are
// re-decimated to the canvas's pixel columns at every zoom level, so a
// graph costs O(visible points) and never more drawing than pixels.
(function () {
  const MIN_SPAN = 0.001; // seconds: narrowest zoom, well below the seeds' 50 ms
  const H = 320, L = 70, R = 14, T = 26, B = 42;
  let groups = new Map(); // key -> {x0, x1, full0, full1, plots: []}, in page time
  let linked = true; // join the same flow across captures

  function niceStep(span, n) {
    const raw = span / n;
    if (!(raw > 0) || !isFinite(raw)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const m of [1, 2, 5, 10]) if (raw <= m * p) return m * p;
    return 10 * p;
  }
  function decimals(step) { return Math.max(0, Math.min(9, -Math.floor(Math.log10(step) + 1e-9))); }
  function si(v, step) {
    if (Math.abs(v) < step / 2) return "0";
    const a = Math.max(Math.abs(v), step);
    let d = 1, s = "";
    if (a >= 1e9) { d = 1e9; s = "G"; } else if (a >= 1e6) { d = 1e6; s = "M"; } else if (a >= 1e3) { d = 1e3; s = "k"; }
    return (v / d).toFixed(decimals(step / d)) + s;
  }
  function fmtY(v, unit, step) {
    if (unit === "bytes" || unit === "bit/s") return si(v, step);
    return v.toFixed(decimals(step));
  }
  function unitSuffix(unit) { return unit === "bytes" ? "B" : unit === "bit/s" ? "bit/s" : " " + unit; }
  // lowerBound: first index with xs[i] >= v.
  function lowerBound(xs, v) {
    let lo = 0, hi = xs.length;
    while (lo < hi) { const m = (lo + hi) >> 1; if (xs[m] < v) lo = m + 1; else hi = m; }
    return lo;
  }

  class Plot {
    constructor(el, g) {
      this.el = el; this.g = g;
      this.hidden = g.layers.map(() => false);
      const bar = document.createElement("div");
      bar.className = "bar";
      g.layers.forEach((l, i) => {
        if (l.x.length === 0) return;
        const k = document.createElement("span");
        k.className = "key";
        k.innerHTML = '<span class="swatch"></span>';
        k.firstChild.style.background = l.dashed ? "repeating-linear-gradient(90deg," + l.color + " 0 5px,transparent 5px 8px)" : l.color;
        k.appendChild(document.createTextNode(l.label));
        k.title = "show/hide";
        k.onclick = () => { this.hidden[i] = !this.hidden[i]; k.classList.toggle("off", this.hidden[i]); this.draw(); };
        bar.appendChild(k);
      });
      if (bar.childNodes.length === 0) bar.appendChild(document.createTextNode("no samples"));
      this.readout = document.createElement("span");
      this.readout.className = "readout";
      bar.appendChild(this.readout);
      this.canvas = document.createElement("canvas");
      this.canvas.setAttribute("role", "img");
      this.canvas.setAttribute("aria-label", g.title);
      el.appendChild(this.canvas);
      el.appendChild(bar);
      this.off = g.offset || 0;
      this.join();
      this.listen();
    }

    // join puts the plot in its group and widens the group's full range.
    join() {
      const g = this.g, key = linked && shared.has(g.link) ? "L" + g.link : "G" + g.group;
      let gr = groups.get(key);
      if (!gr) {
        gr = { full0: Infinity, full1: -Infinity, plots: [] };
        groups.set(key, gr);
      }
      gr.full0 = Math.min(gr.full0, g.x0 + this.off); gr.full1 = Math.max(gr.full1, g.x1 + this.off);
      if (!(gr.full1 > gr.full0)) gr.full1 = gr.full0 + MIN_SPAN;
      gr.x0 = gr.full0; gr.x1 = gr.full1;
      gr.plots.push(this);
      this.group = gr;
    }

    // view is the group's window in this graph's own times.
    view() { return { x0: this.group.x0 - this.off, x1: this.group.x1 - this.off }; }

    // setView shows x0..x1 (this graph's times) in every graph of the group.
    setView(x0, x1) {
      x0 += this.off; x1 += this.off;
      const gr = this.group, full = gr.full1 - gr.full0;
      let span = Math.max(MIN_SPAN, Math.min(x1 - x0, full));
      if (x0 < gr.full0) x0 = gr.full0;
      if (x0 + span > gr.full1) x0 = gr.full1 - span;
      gr.x0 = x0; gr.x1 = x0 + span;
      for (const p of gr.plots) p.draw();
    }

    listen() {
      const c = this.canvas;
      c.addEventListener("wheel", (e) => {
        e.preventDefault();
        const { x0, x1 } = this.view(), w = this.plotW();
        const f = Math.exp(Math.max(-1, Math.min(1, e.deltaY * (e.deltaMode === 1 ? 0.05 : 0.0015))));
        const px = Math.max(0, Math.min(w, e.offsetX - L));
        const t = x0 + (px / w) * (x1 - x0);
        const span = Math.max(MIN_SPAN, (x1 - x0) * f);
        this.setView(t - (px / w) * span, t - (px / w) * span + span);
      }, { passive: false });
      c.addEventListener("pointerdown", (e) => {
        c.setPointerCapture(e.pointerId);
        const v = this.view();
        this.drag = { x: e.clientX, x0: v.x0, x1: v.x1 };
      });
      c.addEventListener("pointermove", (e) => {
        if (this.drag) {
          const d = this.drag, dt = -((e.clientX - d.x) / this.plotW()) * (d.x1 - d.x0);
          this.setView(d.x0 + dt, d.x1 + dt);
        }
        this.showReadout(e.offsetX, e.offsetY);
      });
      const end = () => { this.drag = null; };
      c.addEventListener("pointerup", end);
      c.addEventListener("pointercancel", end);
      c.addEventListener("pointerleave", () => { this.readout.textContent = ""; });
      c.addEventListener("dblclick", () => this.setView(this.group.full0 - this.off, this.group.full1 - this.off));
      // Keyboard: + and - zoom around the centre, arrows pan, 0 resets.
      c.tabIndex = 0;
      c.addEventListener("keydown", (e) => {
        const { x0, x1 } = this.view(), span = x1 - x0, mid = (x0 + x1) / 2;
        let z = 0, pan = 0;
        if (e.key === "+" || e.key === "=") z = 0.5;
        else if (e.key === "-") z = 2;
        else if (e.key === "ArrowLeft") pan = -0.25;
        else if (e.key === "ArrowRight") pan = 0.25;
        else if (e.key === "0") { this.setView(this.group.full0 - this.off, this.group.full1 - this.off); e.preventDefault(); return; }
        else return;
        e.preventDefault();
        if (z) this.setView(mid - (span * z) / 2, mid + (span * z) / 2);
        else this.setView(x0 + pan * span, x1 + pan * span);
      });
    }

    plotW() { return Math.max(10, this.canvas.clientWidth - L - R); }

    showReadout(px, py) {
      if (!this.yr) return;
      const { x0, x1 } = this.view(), w = this.plotW(), h = H - T - B;
      if (px < L || px > L + w || py < T || py > T + h) { this.readout.textContent = ""; return; }
      const t = x0 + ((px - L) / w) * (x1 - x0);
      const y = this.yr[1] - ((py - T) / h) * (this.yr[1] - this.yr[0]);
      const tstep = (x1 - x0) / w, ystep = (this.yr[1] - this.yr[0]) / h;
      this.readout.textContent = "t = " + t.toFixed(decimals(tstep)) + " s, y = " + fmtY(y, this.g.unit, ystep) + unitSuffix(this.g.unit) +
        ", window " + (x1 - x0 >= 1 ? (x1 - x0).toPrecision(3) + " s" : ((x1 - x0) * 1000).toPrecision(3) + " ms");
    }

    // visible returns, per layer, the drawable points of the view: raw
    // points when there are few, else one column aggregate per pixel.
    visible(x0, x1, w) {
      const out = [];
      const span = x1 - x0;
      this.g.layers.forEach((l, li) => {
        if (this.hidden[li] || l.x.length === 0) { out.push(null); return; }
        const lo = l.lo || l.hi;
        if (l.style === "rate") {
          // Sum buckets into bins of a power-of-two multiple of the bucket,
          // about three pixels wide, aligned so panning does not shimmer.
          let want = span / (w / 3);
          if (this.g.ratebin && span > 20 * this.g.ratebin) want = Math.max(want, this.g.ratebin);
          let bw = l.bucket;
          while (bw < want) bw *= 2;
          const k0 = Math.floor(Math.max(x0, this.g.x0) / bw), k1 = Math.floor(Math.min(x1, this.g.x1) / bw);
          const n = Math.max(0, k1 - k0 + 1), sums = new Float64Array(n);
          const i0 = lowerBound(l.x, k0 * bw - l.bucket), i1 = lowerBound(l.x, (k1 + 1) * bw);
          for (let i = i0; i < i1; i++) {
            const k = Math.floor((l.x[i] + l.bucket / 2) / bw) - k0;
            if (k >= 0 && k < n) sums[k] += l.hi[i];
          }
          const xs = [], ys = [];
          for (let k = 0; k < n; k++) {
            const a = Math.max((k0 + k) * bw, this.g.x0), b = Math.min((k0 + k + 1) * bw, this.g.x1);
            xs.push(a, b);
            const v = b > a ? sums[k] * 8 / bw : 0;
            ys.push(v, v);
          }
          out.push({ style: "line", color: l.color, dashed: l.dashed, xs, lo: ys, hi: ys });
          return;
        }
        let i0 = lowerBound(l.x, x0), i1 = lowerBound(l.x, x1);
        if (l.style === "step" || l.style === "line") { i0 = Math.max(0, i0 - 1); i1 = Math.min(l.x.length, i1 + 1); }
        if (i1 - i0 <= 2 * w) {
          out.push({ style: l.style, color: l.color, xs: l.x.slice(i0, i1), lo: lo.slice(i0, i1), hi: l.hi.slice(i0, i1) });
          return;
        }
        // One aggregate per pixel column: min/max for ranges; for lines the
        // first, lowest, highest and last value (so no spike is lost).
        const xs = [], los = [], his = [], firsts = [], lasts = [];
        let col = -1;
        for (let i = i0; i < i1; i++) {
          const c = Math.floor(((l.x[i] - x0) / span) * w);
          if (c !== col) {
            col = c;
            xs.push(x0 + ((c + 0.5) / w) * span); los.push(lo[i]); his.push(l.hi[i]); firsts.push(l.hi[i]); lasts.push(l.hi[i]);
          } else {
            const j = xs.length - 1;
            if (lo[i] < los[j]) los[j] = lo[i];
            if (l.hi[i] > his[j]) his[j] = l.hi[i];
            if (l.hi[i] < los[j]) los[j] = l.hi[i];
            lasts[j] = l.hi[i];
          }
        }
        out.push({ style: l.style, color: l.color, xs, lo: los, hi: his, firsts, lasts, agg: true });
      });
      return out;
    }

    draw() {
      const c = this.canvas, dpr = window.devicePixelRatio || 1;
      const cw = c.clientWidth || 600;
      if (c.width !== Math.round(cw * dpr) || c.height !== Math.round(H * dpr)) {
        c.width = Math.round(cw * dpr); c.height = Math.round(H * dpr);
      }
      const ctx = c.getContext("2d");
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.clearRect(0, 0, cw, H);
      ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, cw, H);
      const g = this.g, { x0, x1 } = this.view();
      const w = this.plotW(), h = H - T - B;
      const vis = this.visible(x0, x1, w);
      // y range of what is visible
      let ymin = Infinity, ymax = -Infinity;
      for (const v of vis) {
        if (!v) continue;
        for (let i = 0; i < v.xs.length; i++) {
          if (v.lo[i] < ymin) ymin = v.lo[i];
          if (v.hi[i] > ymax) ymax = v.hi[i];
        }
      }
      if (!isFinite(ymin)) { ymin = 0; ymax = 1; }
      if (g.unit !== "bytes" || g.kind === "window") ymin = Math.min(0, ymin);
      if (ymax <= ymin) ymax = ymin + 1;
      const pad = (ymax - ymin) * 0.05;
      if (ymin !== 0) ymin -= pad;
      ymax += pad;
      this.yr = [ymin, ymax];
      const X = (x) => L + ((x - x0) / (x1 - x0)) * w;
      const Y = (y) => T + h - ((y - ymin) / (ymax - ymin)) * h;
      // grid and ticks
      ctx.font = "11px sans-serif"; ctx.lineWidth = 1;
      const xs = niceStep(x1 - x0, Math.max(2, w / 90)), ys = niceStep(ymax - ymin, 6);
      ctx.strokeStyle = "#e6e6e6"; ctx.fillStyle = "#333";
      ctx.textAlign = "center"; ctx.textBaseline = "top";
      for (let t = Math.ceil(x0 / xs) * xs; t <= x1 + xs * 1e-9; t += xs) {
        const px = Math.round(X(t)) + 0.5;
        ctx.beginPath(); ctx.moveTo(px, T); ctx.lineTo(px, T + h); ctx.stroke();
        ctx.fillText(t.toFixed(decimals(xs)), px, T + h + 4);
      }
      ctx.textAlign = "right"; ctx.textBaseline = "middle";
      for (let v = Math.ceil(ymin / ys) * ys; v <= ymax + ys * 1e-9; v += ys) {
        const py = Math.round(Y(v)) + 0.5;
        ctx.beginPath(); ctx.moveTo(L, py); ctx.lineTo(L + w, py); ctx.stroke();
        ctx.fillText(fmtY(v, g.unit, ys), L - 5, py);
      }
      // layers, clipped to the plot area
      ctx.save();
      ctx.beginPath(); ctx.rect(L, T, w, h); ctx.clip();
      for (const v of vis) if (v) this.drawLayer(ctx, v, X, Y);
      ctx.restore();
      // frame, labels, title
      ctx.strokeStyle = "#444"; ctx.strokeRect(L + 0.5, T + 0.5, w, h);
      ctx.fillStyle = "#222"; ctx.textAlign = "center"; ctx.textBaseline = "alphabetic";
      ctx.fillText(g.xlabel, L + w / 2, H - 6);
      ctx.save(); ctx.translate(13, T + h / 2); ctx.rotate(-Math.PI / 2); ctx.fillText(g.ylabel, 0, 0); ctx.restore();
      ctx.font = "bold 13px sans-serif"; ctx.textAlign = "left";
      ctx.fillText(g.title, L, 17);
    }

    drawLayer(ctx, v, X, Y) {
      ctx.strokeStyle = v.color; ctx.fillStyle = v.color;
      ctx.setLineDash(v.dashed ? [5, 4] : []);
      const n = v.xs.length;
      switch (v.style) {
        case "bars": {
          ctx.lineWidth = 1.5; ctx.beginPath();
          for (let i = 0; i < n; i++) {
            const px = Math.round(X(v.xs[i])) + 0.5; let y0 = Y(v.lo[i]), y1 = Y(v.hi[i]);
            if (y0 - y1 < 1.5) { y1 = y0 - 1.5; }
            ctx.moveTo(px, y0); ctx.lineTo(px, y1);
          }
          ctx.stroke(); break;
        }
        case "step": case "line": {
          ctx.lineWidth = 1.3; ctx.beginPath();
          let prevY = null;
          for (let i = 0; i < n; i++) {
            const px = X(v.xs[i]);
            if (v.agg) {
              const f = Y(v.firsts[i]), lo = Y(v.lo[i]), hi = Y(v.hi[i]), la = Y(v.lasts[i]);
              if (prevY === null) ctx.moveTo(px, f); else if (v.style === "step") ctx.lineTo(px, prevY);
              ctx.lineTo(px, f); ctx.lineTo(px, lo); ctx.lineTo(px, hi); ctx.lineTo(px, la);
              prevY = la;
            } else {
              const py = Y(v.hi[i]);
              if (prevY === null) ctx.moveTo(px, py);
              else { if (v.style === "step") ctx.lineTo(px, prevY); ctx.lineTo(px, py); }
              prevY = py;
            }
          }
          ctx.stroke(); break;
        }
        case "dots": {
          for (let i = 0; i < n; i++) {
            const px = X(v.xs[i]);
            ctx.fillRect(px - 1.5, Y(v.hi[i]) - 1.5, 3, 3);
            if (v.lo[i] !== v.hi[i]) {
              ctx.fillRect(px - 1.5, Y(v.lo[i]) - 1.5, 3, 3);
              if (v.agg) ctx.fillRect(px - 0.5, Y(v.hi[i]), 1, Y(v.lo[i]) - Y(v.hi[i]));
            }
          }
          break;
        }
        case "ticks": {
          ctx.lineWidth = 1.5; ctx.beginPath();
          for (let i = 0; i < n; i++) { const px = X(v.xs[i]), py = Math.round(Y(v.hi[i])) + 0.5; ctx.moveTo(px - 4, py); ctx.lineTo(px + 4, py); }
          ctx.stroke(); break;
        }
        case "marks": {
          ctx.lineWidth = 1.5; ctx.beginPath();
          for (let i = 0; i < n; i++) {
            const px = X(v.xs[i]), py = Y(v.hi[i]);
            ctx.moveTo(px - 3.5, py - 3.5); ctx.lineTo(px + 3.5, py + 3.5); ctx.moveTo(px - 3.5, py + 3.5); ctx.lineTo(px + 3.5, py - 3.5);
          }
          ctx.stroke(); break;
        }
      }
    }
  }

  // Window buttons above each direction's graphs; they act on the group
  // its first graph is in at the time of the click.
  function addButtons(dirEl, dirPlots) {
    const bar = document.createElement("div");
    bar.className = "bar";
    bar.appendChild(document.createTextNode("time window: "));
    for (const [label, span] of [["all", 0], ["1 s", 1], ["100 ms", 0.1], ["50 ms", 0.05], ["10 ms", 0.01]]) {
      const b = document.createElement("button");
      b.type = "button"; b.textContent = label;
      b.onclick = () => {
        const p = dirPlots[0], gr = p.group;
        if (!span) { p.setView(gr.full0 - p.off, gr.full1 - p.off); return; }
        const v = p.view(), mid = (v.x0 + v.x1) / 2;
        p.setView(mid - span / 2, mid + span / 2);
      };
      bar.appendChild(b);
    }
    const h = dirEl.querySelector("summary");
    if (h) h.after(bar); else dirEl.prepend(bar);
    // Collapsed graphs have no width: draw them when opened.
    dirEl.addEventListener("toggle", () => { if (dirEl.open) for (const p of dirPlots) p.draw(); });
  }

  // Flows seen in more than one capture of the page can zoom together.
  const shared = new Set(), sectionOf = new Map();
  for (const g of WANLAB_GRAPHS) {
    if (!g.link) continue;
    const s = sectionOf.get(g.link);
    if (s !== undefined && s !== g.section) shared.add(g.link);
    sectionOf.set(g.link, g.section);
  }
  const plots = [];
  for (const g of WANLAB_GRAPHS) {
    const el = document.getElementById(g.id);
    if (el) plots.push(new Plot(el, g));
  }
  const byDir = new Map();
  for (const p of plots) {
    const dir = p.el.closest(".dir");
    if (!dir) continue;
    if (!byDir.has(dir)) byDir.set(dir, []);
    byDir.get(dir).push(p);
  }
  for (const [dir, ps] of byDir) addButtons(dir, ps);
  const help = document.querySelector("p.help");
  if (shared.size > 0 && help) {
    const l = document.createElement("label");
    l.className = "link";
    const cb = document.createElement("input");
    cb.type = "checkbox"; cb.checked = linked; cb.id = "wanlab-link";
    cb.onchange = () => {
      linked = cb.checked;
      groups = new Map();
      for (const p of plots) p.join();
      for (const p of plots) p.draw();
    };
    l.appendChild(cb);
    l.appendChild(document.createTextNode(" zoom the captures together (the same connection in each capture, aligned by capture time)"));
    help.after(l);
  }
  for (const p of plots) p.draw();
  let pending = false;
  window.addEventListener("resize", () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; for (const p of plots) p.draw(); });
  });
})();
