// "Submit the quiz" with questions unanswered: ask here first (the server asks on its own
// page when this script does not run); a yes here tells the server it was asked.
(function () {
  "use strict";
  var form = document.getElementById("submit-quiz");
  if (!form || !form.dataset.confirm) return;
  form.addEventListener("submit", function (event) {
    if (window.confirm(form.dataset.confirm)) {
      form.elements.confirmed.value = "yes";
    } else {
      event.preventDefault();
    }
  });
})();
