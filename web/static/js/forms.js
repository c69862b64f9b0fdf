// Selects marked data-autosubmit send their form when changed (the button stays for no-JS use).
(function () {
  "use strict";
  var selects = document.querySelectorAll("select[data-autosubmit]");
  for (var i = 0; i < selects.length; i++) {
    selects[i].addEventListener("change", function () { this.form.submit(); });
  }
})();
