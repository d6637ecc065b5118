// tractkv viewer: small progressive enhancements. Every page works without this file.
(function () {
  "use strict";

  // Filter forms submit as soon as a select changes.
  document.addEventListener("change", function (event) {
    var target = event.target;
    if (target.classList && target.classList.contains("auto-submit") && target.form) {
      target.form.submit();
    }
  });

  // A link to one execution (#u-<id>) opens it and the executions it runs inside, then shows it.
  function openTarget() {
    var id = decodeURIComponent(window.location.hash.slice(1));
    var target = id ? document.getElementById(id) : null;
    if (!target) {
      return;
    }
    for (var node = target; node; node = node.parentElement) {
      if (node.tagName === "DETAILS") {
        node.open = true;
      }
    }
    target.scrollIntoView({ block: "start" });
  }
  window.addEventListener("hashchange", openTarget);
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", openTarget);
  } else {
    openTarget();
  }

  var main = document.getElementById("main");
  if (!main || !main.dataset.live || !window.EventSource || !window.fetch) {
    return;
  }
  var liveRef = main.dataset.liveRef || null;
  var state = { events: 0, updates: 0, errors: 0 };
  window.tractkvLive = state;

  var badge = document.createElement("span");
  badge.id = "live";
  badge.className = "live";
  badge.textContent = "connecting…";
  var header = document.querySelector("header");
  if (header) {
    header.appendChild(badge);
  }

  var busy = false;
  var again = false;

  function rememberDetails() {
    var seen = {};
    main.querySelectorAll("details[id]").forEach(function (d) {
      seen[d.id] = d.open;
    });
    return seen;
  }

  function restoreDetails(seen) {
    main.querySelectorAll("details[id]").forEach(function (d) {
      if (Object.prototype.hasOwnProperty.call(seen, d.id)) {
        d.open = seen[d.id];
      }
    });
  }

  function refresh() {
    if (busy) {
      again = true;
      return;
    }
    busy = true;
    var seen = rememberDetails();
    fetch(main.dataset.live, { credentials: "same-origin", cache: "no-store" })
      .then(function (response) {
        if (!response.ok) {
          throw new Error("HTTP " + response.status);
        }
        return response.text();
      })
      .then(function (html) {
        // Server-rendered and escaped by the server; scripts in it could not run (CSP: no inline script).
        main.innerHTML = html;
        restoreDetails(seen);
        state.updates += 1;
        badge.textContent = "live · updated " + new Date().toISOString().slice(11, 19) + " UTC"; // as the pages show times
        main.dispatchEvent(new CustomEvent("tractkv:updated"));
      })
      .catch(function () {
        state.errors += 1;
        badge.textContent = "live · update failed";
      })
      .finally(function () {
        busy = false;
        if (again) {
          again = false;
          refresh();
        }
      });
  }

  function relevant(change) {
    if (!liveRef || change.resync || change.usage) {
      return true;
    }
    return Boolean(change.refs && Object.prototype.hasOwnProperty.call(change.refs, liveRef));
  }

  // `since`: the store's version this page shows; a change made before the stream opened is not missed.
  var since = main.dataset.liveVersion;
  var source = new EventSource("/ui/events" + (since ? "?since=" + encodeURIComponent(since) : ""));
  source.onopen = function () {
    badge.textContent = "live";
  };
  source.onerror = function () {
    badge.textContent = "reconnecting…";
  };
  source.addEventListener("change", function (event) {
    state.events += 1;
    var change = {};
    try {
      change = JSON.parse(event.data);
    } catch (e) {
      change = { resync: true };
    }
    if (relevant(change)) {
      refresh();
    }
  });
})();
