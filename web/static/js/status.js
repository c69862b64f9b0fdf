// Waits for the submission's status to change and reloads the page once it is graded.
// Each request is a long poll: the server answers as soon as the status changes (the grading
// worker wakes it), or after 25 s with the status unchanged, and the next one starts at once.
// Without JavaScript a <noscript> meta refresh reloads the page every 3 s instead.
(function () {
  "use strict";
  var box = document.getElementById("result");
  if (!box || !window.fetch) return;
  var url = box.getAttribute("data-status-url");
  var shown = box.getAttribute("data-status");
  var order = ["queued", "running", "done"];
  var failures = 0;

  function mark(status) {
    var steps = box.querySelectorAll(".steps li");
    var at = order.indexOf(status);
    for (var i = 0; i < steps.length; i++) {
      steps[i].className = i < at ? "done" : (i === at ? "current" : "");
    }
    var badge = document.querySelector("h1 [data-status]");
    if (badge) {
      // the steps are labelled by the server in the page's language; the badge reuses them
      badge.textContent = at >= 0 && steps[at] ? steps[at].textContent : status;
      badge.className = "badge badge-" + status;
    }
  }

  function poll() {
    var started = Date.now();
    // the URL may carry a query already (an LMS frame's session token)
    var query = (url.indexOf("?") < 0 ? "?" : "&") + "wait=25&seen=" + encodeURIComponent(shown);
    fetch(url + query, {credentials: "same-origin", headers: {"Accept": "application/json"}})
      .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
      .then(function (data) {
        failures = 0;
        if (data.finished) { window.location.reload(); return; }
        if (data.status !== shown) { shown = data.status; mark(shown); }
        // A server too busy to hold the request answers at once: then wait a little.
        setTimeout(poll, Date.now() - started < 500 ? 1000 : 0);
      })
      .catch(function () {
        failures += 1;
        setTimeout(poll, Math.min(1000 * failures, 5000));
      });
  }
  poll();
})();
