// Reloads the page every data-seconds while the "update this page" box is ticked; unticking
// it stops the updates for this tab (remembered across the reloads it would have made).
(function () {
  "use strict";
  var box = document.getElementById("auto-refresh");
  if (!box) return;
  var key = "attn-grader:auto-refresh:" + location.pathname;
  var timer = null;
  try { if (sessionStorage.getItem(key) === "off") box.checked = false; } catch (e) { /* storage off */ }
  function arm() {
    clearTimeout(timer);
    if (box.checked) timer = setTimeout(function () { location.reload(); }, 1000 * parseInt(box.dataset.seconds, 10));
  }
  box.addEventListener("change", function () {
    try { sessionStorage.setItem(key, box.checked ? "on" : "off"); } catch (e) { /* storage off */ }
    arm();
  });
  arm();
})();
