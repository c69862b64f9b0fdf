// Each question's "Check answer" posts only that question's form and reloads the page, which
// would lose what was typed into the others. Unsent answers are kept in sessionStorage (this
// tab only) and put back after the reload; a question's draft is dropped once it is sent.
(function () {
  "use strict";
  var root = document.getElementById("questions");
  if (!root || !window.sessionStorage) return;
  var key = "attn-grader:quiz-drafts:" + root.dataset.attempt;
  var forms = root.querySelectorAll("form.answer-form");
  var drafts;
  try { drafts = JSON.parse(sessionStorage.getItem(key) || "{}"); } catch (e) { drafts = {}; }

  function save() { sessionStorage.setItem(key, JSON.stringify(drafts)); }

  function read(form) {
    var values = {};
    var fields = form.querySelectorAll("input, select, textarea");
    for (var i = 0; i < fields.length; i++) {
      var f = fields[i];
      if (!f.name || f.type === "hidden" || f.type === "submit") continue;
      if (f.type === "radio" || f.type === "checkbox") {
        values[f.name + "=" + f.value] = f.checked;
      } else {
        values[f.name] = f.value;
      }
    }
    return values;
  }

  function restore(form, values) {
    var fields = form.querySelectorAll("input, select, textarea");
    for (var i = 0; i < fields.length; i++) {
      var f = fields[i];
      if (f.type === "radio" || f.type === "checkbox") {
        var k = f.name + "=" + f.value;
        if (k in values) f.checked = values[k];
      } else if (f.name in values) {
        f.value = values[f.name];
      }
    }
  }

  for (var i = 0; i < forms.length; i++) {
    (function (form) {
      var id = form.dataset.question;
      if (drafts[id]) restore(form, drafts[id]);  // before editor.js turns textareas into editors
      form.addEventListener("input", function () { drafts[id] = read(form); save(); });
      form.addEventListener("change", function () { drafts[id] = read(form); save(); });
      form.addEventListener("submit", function () {
        form.dataset.sent = "1";  // this answer is being sent: its draft is no longer needed
        delete drafts[id]; save();
      });
    })(forms[i]);
  }
  // CodeMirror editors do not fire input events on the form: read them before leaving.
  window.addEventListener("beforeunload", function () {
    var editors = root.querySelectorAll(".CodeMirror");
    for (var j = 0; j < editors.length; j++) {
      var cm = editors[j].CodeMirror;
      var form = editors[j].closest("form.answer-form");
      if (!cm || !form || form.dataset.sent) continue;
      cm.save();
      var area = form.querySelector("textarea");
      if (area && area.value !== area.defaultValue) drafts[form.dataset.question] = read(form);
    }
    save();
  });
  var finish = document.getElementById("submit-quiz");
  if (finish) finish.addEventListener("submit", function () { sessionStorage.removeItem(key); });
})();
