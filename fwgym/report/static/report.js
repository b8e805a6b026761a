/* fwgym report: sortable tables, tabs, a table filter and transcript toggles. No dependencies. */
(function () {
  "use strict";
  document.documentElement.classList.add("js");

  function cellKey(row, index, numeric) {
    var cell = row.cells[index];
    if (!cell) return numeric ? NaN : "";
    var v = cell.hasAttribute("data-value") ? cell.getAttribute("data-value") : cell.textContent.trim();
    if (!numeric) return v.toLowerCase();
    var x = parseFloat(v);
    return isNaN(x) ? NaN : x;
  }

  function sortBy(th) {
    var table = th.closest("table"), body = table.tBodies[0];
    var index = Array.prototype.indexOf.call(th.parentNode.children, th);
    var numeric = th.getAttribute("data-sort") === "num";
    var dir = th.getAttribute("aria-sort") === "ascending" ? "descending" : "ascending";
    table.querySelectorAll("th[aria-sort]").forEach(function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", dir);
    var sign = dir === "ascending" ? 1 : -1;
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = cellKey(a, index, numeric), y = cellKey(b, index, numeric);
      if (numeric) {  /* empty cells last in either direction */
        if (isNaN(x) && isNaN(y)) return 0;
        if (isNaN(x)) return 1;
        if (isNaN(y)) return -1;
        return sign * (x - y);
      }
      return sign * (x < y ? -1 : x > y ? 1 : 0);
    });
    rows.forEach(function (r) { body.appendChild(r); });
  }

  document.querySelectorAll("table.sortable th[data-sort]").forEach(function (th) {
    th.tabIndex = 0;
    th.addEventListener("click", function () { sortBy(th); });
    th.addEventListener("keydown", function (e) {
      if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sortBy(th); }
    });
  });

  document.querySelectorAll(".tabs").forEach(function (bar) {
    var buttons = bar.querySelectorAll("[role=tab]");
    function show(btn) {
      buttons.forEach(function (b) {
        var on = b === btn, panel = document.getElementById(b.getAttribute("aria-controls"));
        b.setAttribute("aria-selected", on ? "true" : "false");
        b.tabIndex = on ? 0 : -1;
        if (panel) panel.hidden = !on;
      });
    }
    buttons.forEach(function (b) { b.addEventListener("click", function () { show(b); }); });
    var first = bar.querySelector("[aria-selected=true]") || buttons[0];
    if (first) show(first);
  });

  document.querySelectorAll("input[data-filter]").forEach(function (input) {
    var table = document.getElementById(input.getAttribute("data-filter"));
    if (!table) return;
    input.addEventListener("input", function () {
      var q = input.value.trim().toLowerCase();
      Array.prototype.forEach.call(table.tBodies[0].rows, function (r) {
        r.hidden = q !== "" && r.textContent.toLowerCase().indexOf(q) < 0;
      });
    });
  });

  function toggleAll(id, open) {
    var box = document.getElementById(id);
    if (box) box.querySelectorAll("details.msg").forEach(function (d) { d.open = open; });
  }
  document.querySelectorAll("[data-toggle-all]").forEach(function (b) {
    b.addEventListener("click", function () { toggleAll(b.getAttribute("data-toggle-all"), true); });
  });
  document.querySelectorAll("[data-collapse-all]").forEach(function (b) {
    b.addEventListener("click", function () { toggleAll(b.getAttribute("data-collapse-all"), false); });
  });
})();
