// actormq console: every table.list gets a filter box and sortable columns; forms marked
// "confirm" ask first; forms marked "long" show the progress line while the page works.
(function () {
  "use strict";

  function cellValue(row, index) {
    var cell = row.cells[index];
    return cell ? cell.textContent.trim() : "";
  }

  function asNumber(text) {
    if (text === "" || !/^-?[\d.,]+(e[+-]?\d+)?\s*%?$/i.test(text)) { return null; }
    var n = Number(text.replace(/[,%\s]/g, ""));
    return isNaN(n) ? null : n;
  }

  function sortBy(table, index, header) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var descending = header.getAttribute("aria-sort") === "ascending";
    var numeric = rows.every(function (r) {
      var t = cellValue(r, index);
      return t === "" || asNumber(t) !== null;
    });
    rows.sort(function (a, b) {
      var x = cellValue(a, index), y = cellValue(b, index), c;
      if (numeric) { c = (asNumber(x) || 0) - (asNumber(y) || 0); }
      else { c = x.localeCompare(y); }
      return descending ? -c : c;
    });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
      th.removeAttribute("aria-sort");
    });
    header.setAttribute("aria-sort", descending ? "descending" : "ascending");
    rows.forEach(function (r) { body.appendChild(r); });
  }

  function addFilter(table) {
    var box = document.createElement("input");
    box.type = "search";
    box.className = "filter";
    box.placeholder = "filter rows";
    box.setAttribute("aria-label", "filter the rows of " + (table.id || "the table"));
    box.setAttribute("data-for", table.id || "");
    var count = document.createElement("span");
    count.className = "count";
    function apply() {
      var needle = box.value.trim().toLowerCase(), shown = 0;
      Array.prototype.forEach.call(table.tBodies[0].rows, function (r) {
        var hit = !needle || r.textContent.toLowerCase().indexOf(needle) >= 0;
        r.hidden = !hit;
        if (hit) { shown += 1; }
      });
      count.textContent = shown + " of " + table.tBodies[0].rows.length + " rows";
    }
    box.addEventListener("input", apply);
    table.parentNode.insertBefore(box, table);
    table.parentNode.insertBefore(count, table);
    apply();
  }

  document.addEventListener("DOMContentLoaded", function () {
    Array.prototype.forEach.call(document.querySelectorAll("table.list"), function (table) {
      if (!table.tHead || !table.tBodies.length) { return; }
      addFilter(table);
      Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, i) {
        th.classList.add("sortable");
        th.title = "sort";
        th.addEventListener("click", function () { sortBy(table, i, th); });
      });
    });
    Array.prototype.forEach.call(document.querySelectorAll("form.confirm"), function (f) {
      f.addEventListener("submit", function (e) {
        if (!window.confirm(f.getAttribute("data-confirm") || "Sure?")) { e.preventDefault(); }
      });
    });
    Array.prototype.forEach.call(document.querySelectorAll("form.long"), function (f) {
      f.addEventListener("submit", function (e) {
        if (e.defaultPrevented) { return; }
        document.getElementById("progress").hidden = false;
        Array.prototype.forEach.call(f.querySelectorAll("button"), function (b) {
          b.disabled = true;
        });
      });
    });
  });
}());
