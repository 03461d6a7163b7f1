// RunGuard dashboard: the reset buttons. Each posts JSON to the admin API's reset route (same origin,
// Content-Type application/json, as the admin API requires for changes) and reloads the page.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("button[data-reset]").forEach(function (button) {
    var result = button.parentElement.querySelector(".reset-result");
    button.hidden = false;
    button.addEventListener("click", function () {
      button.disabled = true;
      fetch(button.getAttribute("data-reset"), {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: "{}",
        credentials: "same-origin"
      }).then(function (response) {
        if (!response.ok) { throw new Error("HTTP " + response.status); }
        result.textContent = "Reset done.";
        window.setTimeout(function () { window.location.reload(); }, 300);
      }).catch(function (error) {
        result.textContent = "Reset failed: " + error.message;
        button.disabled = false;
      });
    });
  });
});
