// A sign-in link (`/login#token=...`, printed by `toolcards dashboard`) fills the token field;
// the fragment never reaches the server, and it is dropped from the address bar at once.
(function () {
  var match = /^#token=([^&]+)$/.exec(window.location.hash);
  if (!match) return;
  history.replaceState(null, "", window.location.pathname);
  document.addEventListener("DOMContentLoaded", function () {
    var field = document.getElementById("token");
    if (field) field.value = decodeURIComponent(match[1]);
  });
})();
