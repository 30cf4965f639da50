// toolcards dashboard: a small force-directed layout for the knowledge graph network.
// The server draws the nodes on a circle; this spreads them (Fruchterman-Reingold with a
// pull towards the centre) and moves the existing SVG elements. Deterministic: the same
// graph gives the same picture.
"use strict";
(function () {
  var ITERATIONS = 300;

  function position(g) {
    var m = /translate\(\s*([-\d.]+)[ ,]+([-\d.]+)\s*\)/.exec(g.getAttribute("transform") || "");
    return m ? [parseFloat(m[1]), parseFloat(m[2])] : [0, 0];
  }

  function layout(svg) {
    var box = svg.viewBox.baseVal;
    var width = box && box.width ? box.width : 880;
    var height = box && box.height ? box.height : 520;
    var nodeEls = Array.prototype.slice.call(svg.querySelectorAll("g.node"));
    var n = nodeEls.length;
    if (n === 0) return;
    var index = {};
    var pos = nodeEls.map(function (g, i) {
      index[g.dataset.name] = i;
      var p = position(g);
      return [p[0] + (i % 7) * 0.01, p[1] + (i % 5) * 0.01];
    });
    var edgeEls = Array.prototype.slice.call(svg.querySelectorAll("g.edge"));
    var edges = edgeEls.map(function (g) { return [index[g.dataset.source], index[g.dataset.target]]; })
      .filter(function (e) { return e[0] !== undefined && e[1] !== undefined && e[0] !== e[1]; });
    var k = 0.75 * Math.sqrt((width * height) / n);
    var cx = width / 2, cy = height / 2;
    var temperature = width / 8;
    var gravity = 0.4 * Math.sqrt(n);  // keeps loose parts near the rest
    for (var it = 0; it < ITERATIONS; it++) {
      var disp = pos.map(function () { return [0, 0]; });
      for (var i = 0; i < n; i++) {
        for (var j = i + 1; j < n; j++) {
          var dx = pos[i][0] - pos[j][0], dy = pos[i][1] - pos[j][1];
          var d = Math.max(Math.sqrt(dx * dx + dy * dy), 0.01);
          var f = (k * k) / d / d;
          disp[i][0] += dx * f; disp[i][1] += dy * f;
          disp[j][0] -= dx * f; disp[j][1] -= dy * f;
        }
      }
      edges.forEach(function (e) {
        var a = e[0], b = e[1];
        var dx = pos[a][0] - pos[b][0], dy = pos[a][1] - pos[b][1];
        var d = Math.max(Math.sqrt(dx * dx + dy * dy), 0.01);
        var f = d / k;
        disp[a][0] -= dx * f; disp[a][1] -= dy * f;
        disp[b][0] += dx * f; disp[b][1] += dy * f;
      });
      for (var m = 0; m < n; m++) {
        disp[m][0] -= (pos[m][0] - cx) * gravity;
        disp[m][1] -= (pos[m][1] - cy) * gravity;
        var len = Math.max(Math.sqrt(disp[m][0] * disp[m][0] + disp[m][1] * disp[m][1]), 0.01);
        var step = Math.min(len, temperature);
        pos[m][0] += (disp[m][0] / len) * step;
        pos[m][1] += (disp[m][1] / len) * step;
      }
      temperature = Math.max(0.5, temperature * 0.985);
    }
    fit(pos, width, height);
    nodeEls.forEach(function (g, i) {
      g.setAttribute("transform", "translate(" + pos[i][0].toFixed(1) + " " + pos[i][1].toFixed(1) + ")");
    });
    edgeEls.forEach(function (g) {
      var a = pos[index[g.dataset.source]], b = pos[index[g.dataset.target]];
      if (!a || !b) return;
      var line = g.querySelector("line"), label = g.querySelector("text");
      line.setAttribute("x1", a[0].toFixed(1)); line.setAttribute("y1", a[1].toFixed(1));
      line.setAttribute("x2", b[0].toFixed(1)); line.setAttribute("y2", b[1].toFixed(1));
      if (label) {
        var length = Math.sqrt((a[0] - b[0]) * (a[0] - b[0]) + (a[1] - b[1]) * (a[1] - b[1]));
        label.setAttribute("x", ((a[0] + b[0]) / 2).toFixed(1));
        label.setAttribute("y", ((a[1] + b[1]) / 2 - 3).toFixed(1));
        label.setAttribute("visibility", length < 70 ? "hidden" : "visible");
      }
    });
    svg.classList.add("laid-out");
  }

  // Scale and move the picture into the box, leaving room for the labels on the right.
  function fit(pos, width, height) {
    var left = 30, right = width - 150, top = 30, bottom = height - 30;
    var minX = Infinity, maxX = -Infinity, minY = Infinity, maxY = -Infinity;
    pos.forEach(function (p) {
      minX = Math.min(minX, p[0]); maxX = Math.max(maxX, p[0]);
      minY = Math.min(minY, p[1]); maxY = Math.max(maxY, p[1]);
    });
    var scale = Math.min((right - left) / Math.max(maxX - minX, 1), (bottom - top) / Math.max(maxY - minY, 1), 3);
    var offX = left + ((right - left) - (maxX - minX) * scale) / 2;
    var offY = top + ((bottom - top) - (maxY - minY) * scale) / 2;
    pos.forEach(function (p) {
      p[0] = offX + (p[0] - minX) * scale;
      p[1] = offY + (p[1] - minY) * scale;
    });
  }

  function layoutAll() {
    document.querySelectorAll('svg[data-testid="graph"]').forEach(layout);
  }

  document.addEventListener("DOMContentLoaded", layoutAll);
  document.addEventListener("panel:updated", function (e) {
    if (e.target && e.target.dataset && e.target.dataset.panel === "graph") layoutAll();
  });
})();
