// "Submit the quiz" with questions unanswered: the warning above the button names them, so the
// click that follows it is the answer (a second, blocking dialog stopped LMS-driven browsers,
// which dismiss dialogs, from ever submitting). Without this script the server asks on a page.
(function () {
  "use strict";
  var form = document.getElementById("submit-quiz");
  if (!form || !document.getElementById("unanswered-warning")) return;
  form.addEventListener("submit", function () {
    form.elements.confirmed.value = "yes";
  });
})();
