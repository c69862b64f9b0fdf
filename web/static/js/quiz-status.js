// Quiz code answers are graded by the grading workers: each pending answer's box polls its
// status and swaps in the feedback once the verdict is stored (the rest of the page, with any
// answers being typed, stays as it is). Without JavaScript the box links to a reload, and the
// attempt page refreshes itself.
(function () {
  "use strict";
  if (!window.fetch) return;
  var boxes = document.querySelectorAll("[data-quiz-status-url]");
  Array.prototype.forEach.call(boxes, function (box) {
    var url = box.getAttribute("data-quiz-status-url");
    var delay = 800;
    function poll() {
      fetch(url, {credentials: "same-origin", headers: {"Accept": "application/json"}})
        .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
        .then(function (data) {
          if (data.pending) {
            delay = Math.min(delay * 1.3, 4000);
            setTimeout(poll, delay);
            return;
          }
          var article = box.closest("article");
          var holder = document.createElement("div");
          holder.innerHTML = data.html;  // rendered (and escaped) by the server's template
          box.replaceWith.apply(box, holder.childNodes);
          var button = article && article.querySelector("form button[type=submit]");
          if (button && data.open) button.disabled = false;  // another try is allowed
        })
        .catch(function () { setTimeout(poll, 5000); });
    }
    setTimeout(poll, delay);
  });
})();
