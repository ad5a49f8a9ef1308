// actormq console: line charts drawn as SVG from a figure's data-series, a JSON object of
// series name -> [[unix seconds, value], ...]. No library, no network.
(function () {
  "use strict";
  var NS = "http://www.w3.org/2000/svg";
  var COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b",
                "#e377c2"];
  var W = 560, H = 200, L = 56, R = 10, T = 10, B = 28;

  function el(name, attrs, text) {
    var e = document.createElementNS(NS, name);
    Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined) { e.textContent = text; }
    return e;
  }

  function clock(t) {
    var d = new Date(t * 1000);
    return ("0" + d.getHours()).slice(-2) + ":" + ("0" + d.getMinutes()).slice(-2) + ":" +
      ("0" + d.getSeconds()).slice(-2);
  }

  function draw(figure) {
    var series = JSON.parse(figure.getAttribute("data-series") || "{}");
    var names = Object.keys(series).filter(function (n) { return series[n].length; });
    if (!names.length) { return; }
    var t0 = Infinity, t1 = -Infinity, v1 = 0;
    names.forEach(function (n) {
      series[n].forEach(function (p) {
        t0 = Math.min(t0, p[0]); t1 = Math.max(t1, p[0]); v1 = Math.max(v1, p[1]);
      });
    });
    if (t1 === t0) { t1 = t0 + 1; }
    if (v1 === 0) { v1 = 1; }
    function x(t) { return L + (t - t0) / (t1 - t0) * (W - L - R); }
    function y(v) { return T + (1 - v / v1) * (H - T - B); }
    var svg = el("svg", {viewBox: "0 0 " + W + " " + H, width: W, height: H, role: "img",
                         "aria-label": figure.querySelector("figcaption").textContent});
    svg.appendChild(el("line", {x1: L, y1: y(0), x2: W - R, y2: y(0), stroke: "#999"}));
    svg.appendChild(el("line", {x1: L, y1: T, x2: L, y2: y(0), stroke: "#999"}));
    var unit = figure.getAttribute("data-unit") || "";
    svg.appendChild(el("text", {x: L - 4, y: T + 8, "text-anchor": "end", "font-size": 10},
                       String(Math.round(v1 * 100) / 100)));
    svg.appendChild(el("text", {x: L - 4, y: y(0), "text-anchor": "end", "font-size": 10}, "0"));
    svg.appendChild(el("text", {x: 4, y: H / 2, "font-size": 10}, unit));
    svg.appendChild(el("text", {x: L, y: H - 8, "font-size": 10}, clock(t0)));
    svg.appendChild(el("text", {x: W - R, y: H - 8, "text-anchor": "end", "font-size": 10},
                       clock(t1)));
    var legend = document.createElement("ul");
    legend.className = "legend";
    names.forEach(function (n, i) {
      var color = COLORS[i % COLORS.length];
      var pts = series[n].map(function (p) { return x(p[0]).toFixed(1) + "," + y(p[1]).toFixed(1); });
      svg.appendChild(el("polyline", {points: pts.join(" "), fill: "none", stroke: color,
                                      "stroke-width": 1.5, "data-series": n}));
      var last = series[n][series[n].length - 1];
      var item = document.createElement("li");
      item.style.color = color;
      item.textContent = n + ": " + Math.round(last[1] * 100) / 100;
      legend.appendChild(item);
    });
    figure.appendChild(svg);
    figure.appendChild(legend);
  }

  document.addEventListener("DOMContentLoaded", function () {
    Array.prototype.forEach.call(document.querySelectorAll("figure.chart"), draw);
  });
}());
