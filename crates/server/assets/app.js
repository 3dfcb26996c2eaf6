// Scribe viewer: one page over the JSON API under /api/ (see the README's API reference).
//
// Safety rule of this file: stored text reaches the page only as text nodes (h() below,
// textContent), except markdown, which goes through marked with raw HTML escaped and then
// DOMPurify before it is inserted. The server's Content-Security-Policy allows only this
// server's own scripts, so even a missed case could not run an inline script.
"use strict";

(function () {
  // ---------------------------------------------------------------- helpers

  /** Creates an element: h("a", {href: "/x", class: "y"}, "text", child, [more]). */
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    if (attrs) {
      for (const [k, v] of Object.entries(attrs)) {
        if (v === null || v === undefined || v === false) continue;
        if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
        else if (k === "dataset") Object.assign(el.dataset, v);
        else el.setAttribute(k, v === true ? "" : String(v));
      }
    }
    append(el, children);
    return el;
  }
  function append(el, children) {
    for (const c of children.flat(Infinity)) {
      if (c === null || c === undefined || c === false) continue;
      el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
  }
  const SVG = "http://www.w3.org/2000/svg";
  function s(tag, attrs, ...children) {
    const el = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
    for (const c of children.flat()) {
      if (c === null || c === undefined) continue;
      el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
  }
  function escapeHtml(text) {
    return String(text)
      .replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")
      .replace(/"/g, "&quot;").replace(/'/g, "&#39;");
  }

  const fmtInt = (n) => Number(n || 0).toLocaleString("en-US");
  /** `1 message`, `2 messages`, `12,345 messages` (as `scribe` prints a count). */
  const counted = (n, word) => `${fmtInt(n)} ${word}${Number(n) === 1 ? "" : "s"}`;
  // What a page left out because its stored rows cannot be read (the API's `left_out`:
  // one line each, naming the row), in one box; `what` names the kind ("session",
  // "search hit"). No lines, no box.
  const leftOutBox = (lines, what) => lines.length ? [h("div", { class: "error-box", role: "status" },
    `${counted(lines.length, what)} could not be read and ${lines.length === 1 ? "was" : "were"} left out (`,
    h("code", null, "scribe db check"), " names the values to set right):",
    h("ul", null, ...lines.map((line) => h("li", null, line))))] : [];
  function fmtCompact(n) {
    const a = Math.abs(n);
    if (a < 1e3) return String(n);
    if (a < 1e6) return (n / 1e3).toFixed(1) + "k";
    if (a < 1e9) return (n / 1e6).toFixed(1) + "M";
    return (n / 1e9).toFixed(1) + "G";
  }
  /** Dollars as `scribe` prints them: cents, or up to four decimals below $0.10. */
  function fmtUsd(v) {
    v = Number(v || 0);
    if (v === 0 || Math.abs(v) >= 0.1) return "$" + v.toFixed(2);
    let t = v.toFixed(4);
    while (t.endsWith("0") && t.length > t.indexOf(".") + 3) t = t.slice(0, -1);
    return "$" + t;
  }
  // A cost that leaves out usage of models without a price (a session's cost_partial, a
  // group's unpriced_sessions) is marked "+?", and is "?" when nothing had a price, as
  // scribe list and stats mark it.
  const UNPRICED = "leaves out usage of models without a price";
  function fmtCost(v, partial) {
    if (!partial) return fmtUsd(v);
    return Number(v || 0) === 0 ? "?" : fmtUsd(v) + "+?";
  }
  // A cost cell keeps its amount, so alignCosts can write its column in one format.
  function costCell(v, partial) {
    const attrs = partial ? { class: "num unpriced", title: UNPRICED } : { class: "num" };
    attrs.dataset = { usd: String(Number(v || 0)), partial: partial ? "1" : "" };
    return h("td", attrs, fmtCost(v, partial));
  }
  /** Each cost column of `table` in one format, as `scribe` prints a column
   * (ui::dollar_column): as many decimals as the amount that needs most (2 to 4), so
   * `$0.0040` stands beside `$0.0035`, never `$0.004`, and the points line up. */
  function alignCosts(table) {
    const columns = new Map();
    for (const td of table.querySelectorAll("td[data-usd]")) {
      if (!columns.has(td.cellIndex)) columns.set(td.cellIndex, []);
      columns.get(td.cellIndex).push(td);
    }
    for (const cells of columns.values()) {
      const decimals = Math.max(2, ...cells.map((td) => {
        const text = fmtUsd(td.dataset.usd);
        return text.length - text.indexOf(".") - 1;
      }));
      for (const td of cells) {
        const v = Number(td.dataset.usd);
        const partial = td.dataset.partial === "1";
        const text = partial && v === 0 ? "?" : "$" + v.toFixed(decimals) + (partial ? "+?" : "");
        if (td.textContent !== text) td.textContent = text;
      }
    }
    return table;
  }
  // A session with no usage recorded (its usage_recorded false: no model answered, or its
  // agent keeps no usage) shows "—" for its tokens and cost, as scribe list does, and
  // "no usage recorded" in prose: not known, rather than 0 and $0.00.
  const NO_USAGE = "no usage recorded";
  // Usage recorded without tokens (the agent kept only a cost: Crush) shows "—" for its
  // tokens and its cost, as scribe list does: not known, rather than 0.
  const NO_TOKENS = "no tokens recorded";
  function sessionCost(s) {
    return s.usage_recorded === false ? NO_USAGE : fmtCost(s.cost_usd, s.cost_partial);
  }
  // A row's tokens and cost cells (a session's, or a usage group's).
  function usageCells(recorded, tokens, cost, partial) {
    if (recorded === false) return [h("td", { class: "num dim", title: NO_USAGE }, "—"), h("td", { class: "num dim", title: NO_USAGE }, "—")];
    if (!tokens || !tokens.total) return [h("td", { class: "num dim", title: NO_TOKENS }, "—"), costCell(cost, partial)];
    return [h("td", { class: "num", title: tokensTitle(tokens) }, fmtCompact(tokens.total)), costCell(cost, partial)];
  }
  // Dates and times are UTC everywhere, as the date filters, the usage chart's days and
  // `scribe stats --by day` read them; times say so.
  const pad = (n) => String(n).padStart(2, "0");
  function fmtDate(ms) {
    const d = new Date(ms);
    return `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}`;
  }
  function fmtDateTime(ms) {
    const d = new Date(ms);
    return `${fmtDate(ms)} ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())} UTC`;
  }
  function fmtAgo(ms) {
    const d = Date.now() - ms;
    if (d < 10e3) return "just now";
    if (d < 60e3) return Math.floor(d / 1e3) + "s ago";
    if (d < 3600e3) return Math.floor(d / 60e3) + "m ago";
    if (d < 86400e3) return Math.floor(d / 3600e3) + "h ago";
    if (d < 28 * 86400e3) return Math.floor(d / 86400e3) + "d ago";
    return fmtDate(ms);
  }
  function timeEl(ms, text) {
    return h("time", { datetime: new Date(ms).toISOString(), title: fmtDateTime(ms) }, text || fmtAgo(ms));
  }
  function tokensTitle(t) {
    return `in ${fmtInt(t.input)} · out ${fmtInt(t.output)} · cache read ${fmtInt(t.cache_read)} · ` +
      `cache write ${fmtInt(t.cache_write)} · reasoning ${fmtInt(t.reasoning)}`;
  }
  const tokenTotal = (t) => (t.input || 0) + (t.output || 0) + (t.cache_read || 0) + (t.cache_write || 0) + (t.reasoning || 0);

  /** GET /api/<path>; rejects with the server's `error` text. */
  async function api(path, params, signal) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params || {})) {
      if (v === null || v === undefined || v === "") continue;
      if (Array.isArray(v)) v.forEach((x) => q.append(k, x));
      else q.append(k, v);
    }
    const url = "/api/" + path + (q.toString() ? "?" + q : "");
    const res = await fetch(url, { signal, headers: { Accept: "application/json" }, credentials: "same-origin" });
    let body = null;
    try { body = await res.json(); } catch (_) { /* not JSON */ }
    if (!res.ok) {
      const err = new Error((body && body.error) || `${res.status} ${res.statusText}`);
      err.status = res.status;
      throw err;
    }
    return body;
  }
  function errorBox(err) {
    return h("div", { class: "error-box", role: "alert" }, String(err && err.message ? err.message : err));
  }
  const isAbort = (err) => err && err.name === "AbortError";

  // ---------------------------------------------------------------- markdown

  let markdownReady = false;
  function setUpMarkdown() {
    if (markdownReady || !window.marked) return;
    markdownReady = true;
    window.marked.use({
      gfm: true,
      breaks: false,
      renderer: {
        // Raw HTML in a message is shown as text, never interpreted.
        html(token) {
          return escapeHtml(typeof token === "string" ? token : token.text || token.raw || "");
        },
        // Images are not fetched (the page loads nothing from elsewhere): show a link.
        image(token) {
          const text = token.text || token.href || "image";
          return `<a href="${escapeHtml(token.href || "")}">[image: ${escapeHtml(text)}]</a>`;
        },
        code(token) {
          const text = token.text || "";
          const lang = (token.lang || "").trim().split(/\s+/)[0];
          return `<pre><code class="hljs">${highlight(text, lang)}</code></pre>`;
        },
      },
    });
    if (window.DOMPurify) {
      window.DOMPurify.addHook("afterSanitizeAttributes", (node) => {
        if (node.tagName === "A" && node.getAttribute("href")) {
          node.setAttribute("target", "_blank");
          node.setAttribute("rel", "noopener noreferrer");
        }
      });
    }
  }
  /** Highlighted HTML of `text` (escaped by highlight.js), or escaped text. */
  function highlight(text, lang) {
    const hljs = window.hljs;
    if (hljs) {
      try {
        if (lang && hljs.getLanguage(lang)) return hljs.highlight(text, { language: lang, ignoreIllegals: true }).value;
        if (!lang && text.length < 20000) return hljs.highlightAuto(text).value;
      } catch (_) { /* fall through */ }
    }
    return escapeHtml(text);
  }
  /** A block of sanitized markdown. */
  function markdown(text) {
    setUpMarkdown();
    const div = h("div", { class: "md" });
    if (window.marked && window.DOMPurify) {
      const html = window.marked.parse(String(text || ""));
      div.innerHTML = window.DOMPurify.sanitize(html, { USE_PROFILES: { html: true }, FORBID_TAGS: ["style", "form", "input", "img"] });
      // Each paragraph takes the direction of its own first letter: Arabic or Hebrew reads
      // right to left, aligned right, with an English paragraph next to it left to right.
      for (const block of div.querySelectorAll("p, li, h1, h2, h3, h4, h5, h6, blockquote, td, th")) block.setAttribute("dir", "auto");
    } else {
      div.append(h("pre", { class: "plain", dir: "auto" }, text));
    }
    return div;
  }
  function codeBlock(text, lang) {
    const code = h("code", { class: "hljs" });
    // highlight() returns highlight.js's escaped HTML; sanitize anyway.
    const html = highlight(String(text), lang);
    code.innerHTML = window.DOMPurify ? window.DOMPurify.sanitize(html) : escapeHtml(text);
    return h("pre", { class: "block" }, code);
  }

  // ---------------------------------------------------------------- live updates

  // The page asks /api/version twice a second (a counter in the server's memory, no
  // database read) rather than holding an /api/events stream open: browsers allow only six
  // connections per host, and a stream per open tab would soon use them all up.
  const live = { listeners: new Set(), version: null, timer: null };
  const LIVE_EVERY = 500;
  const LIVE_EVERY_HIDDEN = 5000;
  function startLive() {
    const badge = document.getElementById("live");
    let inFlight = false;
    const poll = async () => {
      if (inFlight) return;
      inFlight = true;
      clearTimeout(live.timer);
      try {
        const { version } = await api("version");
        badge.classList.add("on");
        badge.title = "Live: the page follows changes to the database";
        if (live.version !== null && version !== live.version) {
          badge.classList.add("flash");
          setTimeout(() => badge.classList.remove("flash"), 400);
          document.body.dataset.version = String(version);
          for (const fn of live.listeners) fn(version);
        }
        live.version = version;
      } catch (_) {
        badge.classList.remove("on");
        badge.title = "Live: the server does not answer";
      } finally {
        inFlight = false;
        live.timer = setTimeout(poll, document.visibilityState === "hidden" ? LIVE_EVERY_HIDDEN : LIVE_EVERY);
      }
    };
    poll();
    document.addEventListener("visibilitychange", () => {
      if (document.visibilityState === "visible") poll();
    });
  }
  /** Calls `fn` on every change while the current view is shown; coalesces bursts. */
  function onChange(fn) {
    let timer = null;
    let running = false;
    let again = false;
    const run = async () => {
      if (running) { again = true; return; }
      running = true;
      try { await fn(); } catch (err) { if (!isAbort(err)) console.error(err); }
      running = false;
      if (again) { again = false; run(); }
    };
    const listener = () => { clearTimeout(timer); timer = setTimeout(run, 80); };
    live.listeners.add(listener);
    view.cleanups.push(() => { live.listeners.delete(listener); clearTimeout(timer); });
  }

  // ---------------------------------------------------------------- routing

  const main = () => document.getElementById("main");
  const view = { cleanups: [], token: 0, path: "" };
  function setState(state) { main().dataset.state = state; }
  function navigate(url, replace) {
    if (replace) history.replaceState(null, "", url);
    else { remember(); history.pushState(null, "", url); }
    route();
  }
  // Where the reader was (and how many pages of the list were loaded) is kept in the
  // history entry being left, so Back returns to the same place; the views put it back
  // once their content is there (hence scrollRestoration = "manual" in start()).
  function remember() {
    history.replaceState({ ...(history.state || {}), scrollY: window.scrollY, pages: view.pages || 0, focus: focusedSelector() }, "");
  }
  /** What has the keyboard focus in the view (a session row's link, a hit), as a selector. */
  function focusedSelector() {
    const a = document.activeElement;
    if (!a || !main().contains(a)) return null;
    const row = a.closest("tr.session[data-id]");
    if (row) return `tr.session[data-id="${CSS.escape(row.dataset.id)}"] td.title-cell > a`;
    const hit = a.closest("a.hit[data-message]");
    if (hit) return `a.hit[data-message="${CSS.escape(hit.dataset.message)}"]`;
    return null;
  }
  /**
   * Puts the keyboard focus in the view just shown, once its content is there, so that
   * keyboard and screen-reader users land in it rather than on <body>: back in a view (Back),
   * on what had it when the view was left (the row or hit that was opened); otherwise on the
   * view's heading, unless the view put it in itself already (the search box). The page's
   * first view leaves it where the browser put it.
   */
  function landFocus(token) {
    if (!stillShown(token) || view.first) return;
    const r = view.restore;
    const back = r && r.focus ? document.querySelector(r.focus) : null;
    // preventScroll: the view has put the scroll where it belongs.
    if (back) { back.focus({ preventScroll: true }); return; }
    const active = document.activeElement;
    if (active && active !== document.body && main().contains(active)) return;
    const target = main().querySelector("h1") || main();
    if (!target.hasAttribute("tabindex")) target.setAttribute("tabindex", "-1");
    target.focus({ preventScroll: true });
  }
  /** Scrolls back to where the reader was in this history entry, if it says. */
  function restoreScroll(token) {
    const r = view.restore;
    if (r && stillShown(token)) window.scrollTo(0, r.scrollY);
  }
  function route() {
    for (const fn of view.cleanups.splice(0)) fn();
    view.first = view.token === 0;
    view.token += 1;
    const st = history.state;
    view.restore = st && typeof st.scrollY === "number" ? st : null;
    view.pages = 0;
    const path = location.pathname;
    const m = main();
    m.replaceChildren();
    setState("loading");
    for (const a of document.querySelectorAll("[data-nav]")) a.classList.remove("current");
    const current = (name) => document.querySelector(`[data-nav="${name}"]`)?.classList.add("current");
    // The tab (and the history menu) names the view; a conversation sets its own title.
    document.title = { "/search": "Search · Scribe", "/usage": "Usage · Scribe" }[path] || (path.startsWith("/s/") ? "Scribe" : "Sessions · Scribe");
    view.path = path + location.search;
    if (path.startsWith("/s/")) {
      showSession(decodeURIComponent(path.slice(3)));
    } else if (path === "/search") {
      current("search");
      showSearch();
    } else if (path === "/usage") {
      current("usage");
      showUsage();
    } else {
      current("sessions");
      showSessions();
    }
  }
  /** Whether the view that started at `token` is still the one shown. */
  const stillShown = (token) => token === view.token;
  document.addEventListener("click", (e) => {
    const a = e.target.closest && e.target.closest("a[data-link]");
    if (!a || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    const url = new URL(a.href, location.href);
    if (url.origin !== location.origin) return;
    e.preventDefault();
    if (url.pathname === location.pathname && url.search === location.search && url.hash) {
      remember();
      history.pushState(null, "", url.pathname + url.search + url.hash);
      window.dispatchEvent(new HashChangeEvent("hashchange"));
      return;
    }
    navigate(url.pathname + url.search + url.hash);
  });
  // Back/Forward between entries that differ only in their #message (a permalink was
  // followed) stays in the conversation as loaded; the hashchange that follows marks the
  // message. Anything else shows its view afresh.
  window.addEventListener("popstate", () => {
    const hash = location.hash;
    const sameView = location.pathname + location.search === view.path && location.pathname.startsWith("/s/");
    if (sameView && (!hash.startsWith("#msg_") || document.getElementById(decodeURIComponent(hash.slice(1))))) {
      if (!hash) for (const x of document.querySelectorAll(".msg.target")) x.classList.remove("target");
      if (history.state && typeof history.state.scrollY === "number") window.scrollTo(0, history.state.scrollY);
      return;
    }
    route();
  });
  const params = () => new URLSearchParams(location.search);
  function setParams(values) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(values)) if (v !== null && v !== undefined && v !== "") q.set(k, v);
    const url = location.pathname + (q.toString() ? "?" + q : "");
    history.replaceState(null, "", url);
    view.path = location.pathname + location.search;
  }
  /**
   * What a session is called where its title would be: the title, else how it began (its
   * first user message, quoted and cut, so it is not taken for a title), else "(untitled)".
   * Claude Code and Codex title few conversations.
   */
  function sessionName(title, preview) {
    if (title) return title;
    if (!preview) return "(untitled)";
    const chars = Array.from(preview);
    return "“" + (chars.length > 60 ? chars.slice(0, 59).join("").trimEnd() + "…" : preview) + "”";
  }
  function sessionLink(s, text) {
    return h("a", { href: "/s/" + encodeURIComponent(s.id), "data-link": true }, text || sessionName(s.title, s.preview));
  }

  let choicesCache = null;
  async function choices() {
    if (!choicesCache) choicesCache = api("filters").catch((err) => { choicesCache = null; throw err; });
    return choicesCache;
  }
  function select(name, label, options, value, onchange) {
    const sel = h("select", { name, "aria-label": label, onchange: (e) => onchange(e.target.value) },
      options.map(([v, text]) => h("option", { value: v, selected: v === value }, text)));
    return h("label", null, label, sel);
  }

  // ---------------------------------------------------------------- sessions list

  const SORTS = [["created", "Newest"], ["active", "Recently active"], ["oldest", "Oldest"], ["tokens", "Most tokens"], ["cost", "Most expensive"]];

  async function showSessions() {
    const token = view.token;
    const p = params();
    const state = {
      q: p.get("q") || "", source: p.get("source") || "", model: p.get("model") || "",
      directory: p.get("directory") || "", from: p.get("from") || "", to: p.get("to") || "",
      archived: p.get("archived") || "exclude", sort: p.get("sort") || "created",
    };
    const m = main();
    const bannerSlot = h("div");
    // Sessions whose stored row cannot be read (another program's write), named: the
    // rest of the list still shows.
    const leftOutSlot = h("div", { id: "left-out" });
    let leftOut = [];
    const body = h("tbody");
    const more = h("div", { class: "more-row" });
    const filters = h("div", { class: "filters" });
    const head = h("thead", null, headerRow());
    // Wide tables scroll sideways in their own box, not the whole page (narrow windows).
    m.append(h("h1", null, "Sessions"), filters, bannerSlot, leftOutSlot,
      h("div", { class: "table-wrap" }, h("table", { id: "sessions-table" }, head, body)), more);

    function apply(change) {
      Object.assign(state, change);
      setParams(state.archived === "exclude" ? { ...state, archived: "" } : state);
      // The arrowed column and the sort choice both show the order, however it was picked.
      if ("sort" in change) {
        head.replaceChildren(headerRow());
        const sel = filters.querySelector("select[name=sort]");
        if (sel) sel.value = state.sort;
      }
      load();
    }
    function headerRow() {
      // A sortable heading is a button: reachable with Tab, sorted with Enter or Space.
      const th = (text, sort, cls) => h("th", {
        class: [cls, sort ? "sortable" : "", state.sort === sort ? "sorted" : ""].join(" ").trim(),
        title: sort ? "Sort by " + text.replace(" (UTC)", "").toLowerCase() : null,
        "aria-sort": sort && state.sort === sort ? "descending" : null,
        onclick: sort ? () => apply({ sort }) : null,
      }, sort ? h("button", { type: "button", class: "th-sort" }, text, state.sort === sort ? " ↓" : "") : text);
      return h("tr", null, th("Session", null), th("Source"), th("Model"), th("Msgs", null, "num"),
        th("Tokens", "tokens", "num"), th("Cost", "cost", "num"), th("Created (UTC)", "created", "num"), th("Active", "active", "num"));
    }

    // Filters: the choices come from the database (most used first).
    const fromDate = (v) => h("input", { type: "date", value: v, "aria-label": "from", onchange: (e) => apply({ from: e.target.value }) });
    const toDate = (v) => h("input", { type: "date", value: v, "aria-label": "to", onchange: (e) => apply({ to: e.target.value }) });
    const titleInput = h("input", { type: "search", placeholder: "Title contains…", value: state.q, "aria-label": "Title contains" });
    let titleTimer = null;
    titleInput.addEventListener("input", () => { clearTimeout(titleTimer); titleTimer = setTimeout(() => apply({ q: titleInput.value }), 200); });
    filters.append(titleInput);
    try {
      const c = await choices();
      if (!stillShown(token)) return;
      const opts = (list, all) => [["", all], ...list.map((x) => [x.value, `${x.value} (${fmtInt(x.sessions)})`])];
      filters.append(
        select("source", "Source", opts(c.sources, "all"), state.source, (v) => apply({ source: v })),
        select("model", "Model", opts(c.models, "all"), state.model, (v) => apply({ model: v })),
        select("directory", "Directory", opts(c.directories, "all"), state.directory, (v) => apply({ directory: v })),
      );
    } catch (err) { if (stillShown(token)) filters.append(errorBox(err)); }
    filters.append(
      h("label", { title: "Creation date, a UTC calendar day" }, "From (UTC)", fromDate(state.from)),
      h("label", { title: "Creation date, a UTC calendar day (included)" }, "To (UTC)", toDate(state.to)),
      select("archived", "Archived", [["exclude", "hide"], ["include", "include"], ["only", "only"]], state.archived, (v) => apply({ archived: v })),
      select("sort", "Sort", SORTS, state.sort, (v) => apply({ sort: v })),
    );

    let next = null;
    let pages = 0;
    let loading = null;
    const expanded = new Set();

    function query(after) {
      // `to` is a day: everything created before the next midnight (UTC).
      let to = "";
      if (state.to) { const d = new Date(state.to + "T00:00:00Z"); d.setUTCDate(d.getUTCDate() + 1); to = String(d.getTime()); }
      return { q: state.q, source: state.source, model: state.model, directory: state.directory,
        from: state.from, to, archived: state.archived, sort: state.sort, after, limit: 50 };
    }
    function row(s, childCount, isChild) {
      const kids = childCount ? h("button", {
        class: "kids", "aria-expanded": expanded.has(s.id) ? "true" : "false",
        title: "Show the sub-agent sessions, forks and continuations of this session",
        onclick: (e) => { e.stopPropagation(); toggleChildren(s, e.target); },
      }, (expanded.has(s.id) ? "▾ " : "▸ ") + counted(childCount, "sub-session")) : null;
      const tr = h("tr", { class: "session" + (isChild ? " child" : ""), dataset: { id: s.id } },
        h("td", { class: "title-cell" },
          sessionLink(s, s.title || "(untitled)"),
          s.kind !== "normal" ? h("span", { class: "badge" }, s.kind) : null,
          s.archived_at ? h("span", { class: "badge" }, "archived") : null,
          kids,
          s.preview ? h("div", { class: "preview", dir: "auto" }, s.preview) : null),
        h("td", null, s.source),
        h("td", { class: "mono" }, s.model || ""),
        h("td", { class: "num" }, fmtInt(s.message_count)),
        ...usageCells(s.usage_recorded, s.tokens, s.cost_usd, s.cost_partial),
        h("td", { class: "num" }, timeEl(s.created_at, fmtDate(s.created_at))),
        h("td", { class: "num" }, timeEl(s.updated_at)));
      return tr;
    }
    async function toggleChildren(s, button) {
      const tr = button.closest("tr");
      if (expanded.has(s.id)) {
        expanded.delete(s.id);
        let n = tr.nextElementSibling;
        while (n && n.classList.contains("child") && n.dataset.parent === s.id) { const x = n; n = n.nextElementSibling; x.remove(); }
        alignCosts(body);
        button.textContent = button.textContent.replace("▾", "▸");
        button.setAttribute("aria-expanded", "false");
        return;
      }
      expanded.add(s.id);
      button.textContent = button.textContent.replace("▸", "▾");
      button.setAttribute("aria-expanded", "true");
      await showChildren(s.id, tr);
    }
    async function showChildren(id, tr) {
      const page = await api("sessions", { parent: id, archived: "include", sort: "oldest", limit: 200 });
      let at = tr;
      for (const c of page.sessions) {
        const r = row(c, page.child_counts[c.id] || 0, true);
        r.dataset.parent = id;
        at.after(r);
        at = r;
      }
      alignCosts(body);
    }
    /** The row of a top-level session, remembering what it was drawn from. */
    const drawnFrom = new WeakMap();
    function drawn(s, childCount) {
      const tr = row(s, childCount, false);
      drawnFrom.set(tr, JSON.stringify([s, childCount]));
      return tr;
    }
    function reconcile(page) {
      const old = new Map([...body.children].map((tr) => [tr.dataset.id, tr]));
      const rows = page.sessions.map((s) => {
        const count = page.child_counts[s.id] || 0;
        const tr = old.get(s.id);
        return tr && drawnFrom.get(tr) === JSON.stringify([s, count]) ? tr : drawn(s, count);
      });
      const kept = new Set(rows);
      for (const tr of old.values()) if (!kept.has(tr)) tr.remove();
      let at = body.firstElementChild;
      for (const tr of rows) {
        if (at === tr) at = at.nextElementSibling;
        else body.insertBefore(tr, at);
      }
      while (at) { const n = at.nextElementSibling; at.remove(); at = n; }
      bannerSlot.replaceChildren();
    }
    async function load(after) {
      const mine = view.token;
      if (loading) loading.abort();
      const ctl = new AbortController();
      loading = ctl;
      if (!after) { more.replaceChildren(h("span", { class: "dim" }, "Loading…")); }
      try {
        const page = await api("sessions", query(after), ctl.signal);
        if (!stillShown(mine)) return;
        if (!after && body.children.length && !expanded.size) {
          // A refresh of the first page (a live change): rows that did not change stay
          // in place, so the focus, a hover or a selection on them survives an agent's
          // writes elsewhere; changed, new and gone rows are drawn, moved or removed.
          reconcile(page);
        } else {
          if (!after) { body.replaceChildren(); bannerSlot.replaceChildren(); }
          for (const s of page.sessions) {
            body.append(drawn(s, page.child_counts[s.id] || 0));
            if (expanded.has(s.id)) showChildren(s.id, body.lastElementChild).catch(() => {});
          }
        }
        alignCosts(body);
        if (!after) leftOut = [];
        leftOut.push(...(page.left_out || []));
        leftOutSlot.replaceChildren(...leftOutBox(leftOut, "session"));
        if (!after) pages = 0;
        pages += 1;
        view.pages = pages;
        next = page.next;
        more.replaceChildren(next
          ? h("button", { id: "load-more", onclick: () => load(next) }, "Load more")
          : body.children.length ? h("span", { class: "dim" }, "End of the list") : await nothingListed(ctl.signal));
        setState("ready");
      } catch (err) {
        if (!isAbort(err) && stillShown(mine)) { more.replaceChildren(errorBox(err)); setState("error"); }
      } finally {
        if (loading === ctl) loading = null;
      }
    }
    /** Why the list is empty: the filters, the hidden archived sessions, or an empty store. */
    async function nothingListed(signal) {
      const filtered = ["q", "source", "model", "directory", "from", "to"].some((k) => state[k]) || state.archived !== "exclude";
      if (filtered) return h("span", { class: "dim" }, "No sessions match");
      const any = await api("sessions", { archived: "include", limit: 1 }, signal);
      if (any.sessions.length) return h("span", { class: "dim" }, "No sessions match: every session is archived (Archived: include shows them)");
      return h("p", { class: "empty", id: "no-sessions" }, "No sessions recorded yet. ",
        h("code", null, "scribe import --from all"), " brings in the agents' histories found on this machine; this page follows as they arrive.");
    }
    // Load further pages as the end of the list scrolls into view.
    let restoring = false;
    const io = new IntersectionObserver((entries) => {
      if (entries.some((e) => e.isIntersecting) && next && !loading && !restoring) load(next);
    });
    io.observe(more);
    view.cleanups.push(() => io.disconnect());
    onChange(async () => {
      choicesCache = null;
      if (pages <= 1) await load();
      else bannerSlot.replaceChildren(h("div", { class: "banner" }, "Sessions changed.",
        h("button", { onclick: () => { window.scrollTo(0, 0); load(); } }, "Reload the list")));
    });
    await load();
    // Back to the list: as many pages as were loaded, and the place in them.
    if (view.restore && stillShown(token)) {
      restoring = true;
      try {
        while (pages < view.restore.pages && next && stillShown(token)) await load(next);
      } finally { restoring = false; }
      restoreScroll(token);
    }
    landFocus(token);
  }

  // ---------------------------------------------------------------- a conversation

  const PAGE = 100;

  async function showSession(id) {
    const token = view.token;
    const m = main();
    const head = h("div", { class: "session-head" });
    const top = h("div", { class: "loader" });
    const list = h("div", { class: "msgs", id: "messages" });
    const bottom = h("div", { class: "loader" });
    m.append(head, top, list, bottom);

    let detail;
    try {
      detail = await api("sessions/" + encodeURIComponent(id));
    } catch (err) {
      if (stillShown(token)) { m.replaceChildren(errorBox(err)); setState("error"); landFocus(token); }
      return;
    }
    if (!stillShown(token)) return;
    document.title = sessionName(detail.session.title, detail.preview) + " · Scribe";
    const children = new Map(detail.children.map((c) => [c.id, c]));
    renderHead(head, detail);
    landFocus(token);
    let shownHead = JSON.stringify(detail);

    const loaded = { first: null, last: null, moreBefore: false, moreAfter: false };
    /** The last message shown, as the API gave it: what a live update compares with. */
    const shownAs = new Map();
    const openParts = new Set();
    list.addEventListener("toggle", (e) => {
      const d = e.target;
      if (d.dataset && d.dataset.part) { if (d.open) openParts.add(d.dataset.part); else openParts.delete(d.dataset.part); }
    }, true);

    function place(page, where) {
      const els = page.messages.map((msg) => renderMessage(msg, children, openParts));
      if (where === "before") list.prepend(...els);
      else list.append(...els);
      if (page.messages.length) {
        if (where === "before" || !loaded.first) loaded.first = page.messages[0].id;
        if (where !== "before") loaded.last = page.messages[page.messages.length - 1].id;
      }
      if (where !== "before" && page.messages.length) {
        const last = page.messages[page.messages.length - 1];
        shownAs.clear();
        shownAs.set(last.id, JSON.stringify(last));
      }
      if (where === "before") loaded.moreBefore = page.more_before;
      else loaded.moreAfter = page.more_after;
      if (where === "first") loaded.moreBefore = page.more_before;
      controls();
    }
    function controls() {
      top.replaceChildren(loaded.moreBefore ? h("button", { id: "load-earlier", onclick: earlier }, "Load earlier messages") : "");
      bottom.replaceChildren(loaded.moreAfter
        ? h("button", { id: "load-later", onclick: later }, "Load more messages")
        : h("span", { class: "dim" }, list.children.length ? "" : "No messages yet"));
    }
    let busy = false;
    async function earlier() {
      if (busy || !loaded.first) return;
      busy = true;
      try {
        const before = list.firstElementChild;
        const offset = before ? before.getBoundingClientRect().top : 0;
        const page = await api(`sessions/${encodeURIComponent(id)}/messages`, { before: loaded.first, limit: PAGE });
        if (!stillShown(token)) return;
        place(page, "before");
        if (before) window.scrollBy(0, before.getBoundingClientRect().top - offset);
      } catch (err) { top.replaceChildren(errorBox(err)); } finally { busy = false; }
    }
    async function later() {
      if (busy || !loaded.last) return;
      busy = true;
      try {
        const page = await api(`sessions/${encodeURIComponent(id)}/messages`, { after: loaded.last, limit: PAGE });
        if (!stillShown(token)) return;
        place(page, "after");
      } catch (err) { bottom.replaceChildren(errorBox(err)); } finally { busy = false; }
    }

    const target = location.hash.startsWith("#msg_") ? decodeURIComponent(location.hash.slice(1)) : null;
    // A link to a message that is gone (deleted, pruned, a typo) opens the conversation
    // from the start and says so: `missing=first` answers that page instead of a 404
    // (which the browser would log as an error).
    try {
      const page = await api(`sessions/${encodeURIComponent(id)}/messages`, target ? { from: target, limit: PAGE, missing: "first" } : { limit: PAGE });
      if (!stillShown(token)) return;
      place(page, "first");
      if (page.missing) {
        list.before(h("div", { class: "banner", id: "message-gone", role: "status" },
          "The linked message ", h("span", { class: "mono" }, target), " is no longer in this conversation; showing it from the start."));
      }
    } catch (err) {
      if (stillShown(token)) { list.replaceChildren(errorBox(err)); setState("error"); }
      return;
    }
    if (target) focusMessage(target);
    const onHash = () => { if (location.hash.startsWith("#msg_")) focusMessage(decodeURIComponent(location.hash.slice(1))); };
    window.addEventListener("hashchange", onHash);
    view.cleanups.push(() => window.removeEventListener("hashchange", onHash));

    // Long conversations load further pages as the end comes into view.
    const io = new IntersectionObserver((entries) => {
      if (entries.some((e) => e.isIntersecting) && loaded.moreAfter) later();
    }, { rootMargin: "600px" });
    io.observe(bottom);
    view.cleanups.push(() => io.disconnect());

    // Live: when the end of the conversation is shown, re-read from the last message on
    // (it may have grown parts) and append what is new.
    onChange(async () => {
      const mine = view.token;
      const fresh = await api("sessions/" + encodeURIComponent(id));
      if (!stillShown(mine)) return;
      for (const c of fresh.children) children.set(c.id, c);
      // The head too stays as drawn unless it changed (someone may be copying the id).
      const headAs = JSON.stringify(fresh);
      if (headAs !== shownHead) { shownHead = headAs; renderHead(head, fresh); }
      if (loaded.moreAfter) { controls(); return; }
      const atBottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
      const page = loaded.last
        ? await api(`sessions/${encodeURIComponent(id)}/messages`, { from: loaded.last, limit: 500 })
        : await api(`sessions/${encodeURIComponent(id)}/messages`, { limit: PAGE });
      if (!stillShown(mine)) return;
      for (const msg of page.messages) {
        // A message shown as it is stays (a change elsewhere in the store must not redraw
        // it under a reader selecting its text); a grown or new one is drawn.
        const sig = JSON.stringify(msg);
        const old = document.getElementById(msg.id);
        if (old && shownAs.get(msg.id) === sig) { loaded.last = msg.id; continue; }
        shownAs.clear();
        shownAs.set(msg.id, sig);
        const el = renderMessage(msg, children, openParts);
        if (old) old.replaceWith(el); else list.append(el);
        loaded.last = msg.id;
        if (!loaded.first) loaded.first = msg.id;
      }
      loaded.moreAfter = page.more_after;
      controls();
      if (atBottom && page.messages.length) window.scrollTo(0, document.body.scrollHeight);
    });
    setState("ready");
  }

  function focusMessage(id) {
    const el = document.getElementById(id);
    if (!el) return;
    for (const x of document.querySelectorAll(".msg.target")) x.classList.remove("target");
    el.classList.add("target");
    el.scrollIntoView({ block: "start" });
  }

  function renderHead(head, detail) {
    const s = detail.session;
    const t = s.tokens;
    const total = tokenTotal(t);
    const kindText = { task: "sub-agent session", fork: "fork", continuation: "continuation", title: "title session" }[s.kind];
    const fact = (label, value) => h("span", null, label, " ", h("b", null, value));
    const related = [];
    if (detail.parent) {
      const how = { task: "Sub-agent session of", fork: "Forked from", continuation: "Continues", title: "Title session of" }[s.kind] || "From";
      related.push(h("div", null, how, " ", sessionLink(detail.parent)));
    } else if (s.parent_session_id) {
      related.push(h("div", { class: "dim" }, "From a session that no longer exists (", s.parent_session_id, ")"));
    }
    const cont = detail.children.filter((c) => c.kind === "continuation");
    for (const c of cont) related.push(h("div", null, "Continued in ", sessionLink(c), " →"));
    const others = detail.children.filter((c) => c.kind !== "continuation");
    if (others.length) {
      related.push(h("details", { class: "children", open: others.length <= 6 },
        h("summary", null, `${detail.children_more ? `${fmtInt(others.length)}+ sub-sessions` : counted(others.length, "sub-session")} (sub-agents, forks, titles)`),
        h("ul", null, others.map((c) => h("li", null, sessionLink(c), h("span", { class: "badge" }, c.kind),
          h("span", { class: "dim" }, `${c.model ? " · " + c.model : ""} · ${counted(c.message_count, "message")} · ${sessionCost(c)}`))))));
    }
    // append() leaves out the parts that are null (replaceChildren would show "null").
    head.replaceChildren();
    append(head, [
      h("h1", null, s.title || h("span", { class: "untitled" }, sessionName(null, detail.preview)),
        kindText ? h("span", { class: "badge" }, kindText) : null,
        s.archived_at ? h("span", { class: "badge" }, "archived") : null,
        s.compacting_at ? h("span", { class: "badge warn" }, "compacting") : null,
        s.ended_at ? h("span", { class: "badge", title: s.end_reason || "" }, "ended") : h("span", { class: "badge" }, "open")),
      h("div", { class: "facts" },
        h("span", { class: "mono" }, s.id),
        fact("source", s.source),
        s.model ? fact("model", s.model) : null,
        s.directory ? h("span", null, "in ", h("b", null, s.directory), " ",
          h("a", { href: "/search?directory=" + encodeURIComponent(s.directory), "data-link": true, id: "search-directory", title: "Search the conversations of this directory" }, "search there")) : null,
        fact("started", fmtDateTime(s.created_at)),
        s.ended_at ? fact("ended", fmtDateTime(s.ended_at) + (s.end_reason ? ` (${s.end_reason})` : "")) : null),
      h("div", { class: "facts", id: "session-totals" },
        fact("messages", fmtInt(s.message_count)),
        fact("tool calls", fmtInt(s.tool_call_count)),
        fact("model calls", fmtInt(s.api_call_count)),
        detail.usage_recorded === false ? h("span", { class: "dim", id: "no-usage" }, NO_USAGE) : null,
        detail.usage_recorded !== false && !total ? h("span", { class: "dim", id: "no-tokens" }, NO_TOKENS) : null,
        detail.usage_recorded === false || !total ? null : h("span", { title: tokensTitle(t) }, "tokens ", h("b", null, fmtInt(total)),
          ` (in ${fmtInt(t.input)}, out ${fmtInt(t.output)}, cache read ${fmtInt(t.cache_read)}, cache write ${fmtInt(t.cache_write)}, reasoning ${fmtInt(t.reasoning)})`),
        detail.usage_recorded === false ? null : fact("cost", fmtUsd(s.estimated_cost_usd) + (detail.cost_partial ? " + unknown (models without a price)" : "") + (s.actual_cost_usd != null ? ` (billed ${fmtUsd(s.actual_cost_usd)})` : "")),
        h("a", { href: "/search?session=" + encodeURIComponent(s.id), "data-link": true }, "Search this conversation"),
        h("a", { href: "/api/sessions/" + encodeURIComponent(s.id) + "/markdown", download: "", id: "download-markdown", title: "The whole conversation as Markdown, as scribe export writes it" }, "Download Markdown")),
      related.length ? h("div", { class: "related" }, related) : null]);
  }

  function renderMessage(msg, children, openParts) {
    const u = msg.usage || {};
    const used = tokenTotal(u);
    const el = h("article", { class: `msg role-${msg.role}` + (msg.is_summary ? " summary" : "") + (isUndone(msg.error) ? " undone" : ""), id: msg.id, dataset: { role: msg.role } },
      h("div", { class: "msg-head" },
        h("span", { class: "role" }, msg.role),
        msg.agent ? h("span", null, msg.agent) : null,
        msg.model ? h("span", { class: "mono" }, msg.model) : null,
        timeEl(msg.created_at, fmtDateTime(msg.created_at)),
        used ? h("span", { title: tokensTitle(u) }, `${fmtInt(used)} tokens · ${fmtUsd(msg.cost_usd)}`) : null,
        msg.finish_reason && !["stop", "tool_use", "end_turn"].includes(msg.finish_reason) ? h("span", { class: "badge warn" }, msg.finish_reason) : null,
        h("a", { class: "permalink", href: "#" + msg.id, "data-link": true, title: "Link to this message" }, "#")),
      msg.is_summary ? h("div", { class: "summary-mark" }, "Compaction summary: the conversation before this point, condensed") : null,
      (msg.parts || []).map((p) => renderStored(p, children, openParts)),
      msg.error ? h("div", { class: "msg-error" }, errorText(msg.error)) : null);
    return el;
  }

  // Whether an error says the agent undid the message (a rewind, a rolled-back turn): it
  // stays in the conversation as it was said, dimmed.
  function isUndone(e) {
    return !!e && (e.type === "rewound" || e.type === "rolled_back");
  }

  // A message's error as `scribe show` prints it (scribe_server::text::error_line): its
  // type and message when it has them as text (`error (rewound): undone by a rewind in
  // Gemini CLI`), its type alone when the message is empty (`error (cancelled)`), else its
  // JSON.
  function errorText(e) {
    const text = (key) => (e && typeof e[key] === "string" ? e[key] : null);
    const message = text("message") !== null && text("message").trim() !== "" ? text("message") : null;
    const type = text("type");
    if (message !== null) return "error" + (type !== null ? ` (${type})` : "") + ": " + message;
    if (type !== null) return `error (${type})`;
    return "error: " + JSON.stringify(e, null, 2);
  }

  /** A directory by its last two names (`…/projects/scribe`), for a legend. */
  function shortPath(path) {
    const names = String(path).split(/[\\/]/).filter((n) => n);
    return names.length > 2 ? "…/" + names.slice(-2).join("/") : path;
  }

  /** The first line of `text` with words in it, cut to 80 characters. */
  function firstLine(text) {
    const line = Array.from(String(text || "").split("\n").map((l) => l.trim()).find((l) => l) || "");
    return line.length > 80 ? line.slice(0, 79).join("") + "…" : line.join("");
  }
  function foldable(cls, partId, openParts, summary, ...body) {
    return h("details", { class: cls, dataset: { part: partId }, open: openParts.has(partId) }, h("summary", null, summary), body);
  }

  /** `n` bytes, for people: 980 B, 64 KB, 12.3 MB. */
  function fmtBytes(n) {
    if (n < 1000) return `${n} B`;
    if (n < 1e6) return `${Math.round(n / 1000)} KB`;
    return `${(n / 1e6).toFixed(1)} MB`;
  }
  /**
   * A part as the messages API sent it. A big one (a 20 MB `cat` of a log) comes cut
   * (`cut`, its size whole in `full_bytes`): it is drawn cut, with a button that fetches
   * it whole from /api/parts/{id} and draws that in its place.
   */
  function renderStored(stored, children, openParts) {
    const el = renderPart(stored, children, openParts);
    if (!stored.cut) return el;
    const button = h("button", { class: "show-all" }, `show all (${fmtBytes(stored.full_bytes)})`);
    const note = h("div", { class: "cut-note dim" }, "Long text cut for this page. ", button);
    // In a fold (a tool call, reasoning) the note sits inside it, under what it cut.
    let holder;
    if (el && el.tagName === "DETAILS") { el.append(note); holder = el; }
    else holder = h("div", { class: "cut-part" }, el, note);
    button.addEventListener("click", async () => {
      button.disabled = true;
      button.textContent = "loading…";
      try {
        const whole = await api("parts/" + encodeURIComponent(stored.id));
        const drawn = renderPart(whole, children, openParts);
        holder.replaceWith(drawn || h("div"));
      } catch (err) {
        note.replaceChildren(errorBox(err));
      }
    });
    return holder;
  }

  function renderPart(stored, children, openParts) {
    const p = stored.part || {};
    switch (p.type) {
      case "text":
        // Text the user did not type (an attached file, a command's output, injected
        // context): folded, under its first line.
        if (p.synthetic) return foldable("attached", stored.id, openParts, h("span", { class: "dim" }, "added text", firstLine(p.text) ? " · " + firstLine(p.text) : ""), markdown(p.text));
        return markdown(p.text);
      case "reasoning":
        // No text: the provider sent it redacted or encrypted (kept in its metadata).
        return foldable("reasoning", stored.id, openParts, "Thinking", markdown(p.text || "(redacted by the provider)"));
      case "tool":
        return renderTool(stored, p, children, openParts);
      case "file": return renderFile(p);
      case "image_url":
        return h("div", { class: "attach" }, "🖼 image: ", h("span", { class: "mono" }, p.url));
      case "step_start":
      case "finish":
        return null;
      case "step_finish": {
        const t = p.tokens || {};
        return h("div", { class: "step", title: tokensTitle(t) },
          `step · ${fmtInt(tokenTotal(t))} tokens (in ${fmtInt(t.input)}, out ${fmtInt(t.output)}, cache read ${fmtInt(t.cache_read)}) · ${fmtUsd(p.cost)} · ${p.reason}`);
      }
      case "compaction":
        return h("div", { class: "compaction" }, p.auto ? "── conversation compacted (automatically, the context was nearly full) ──" : "── conversation compacted ──");
      case "patch":
        return h("div", { class: "step" }, "patch ", h("span", { class: "mono" }, p.hash), (p.files || []).length ? ": " + p.files.join(", ") : "");
      case "agent":
        return h("div", { class: "step" }, "agent: ", p.name);
      case "subtask":
        return h("div", { class: "step" }, `↳ sub-agent task (${p.agent}): `, p.description || p.prompt);
      default:
        return foldable("unknown", stored.id, openParts, h("span", { class: "dim" }, `[${p.type || "unknown"} part]`), codeBlock(JSON.stringify(p, null, 2), "json"));
    }
  }

  function renderFile(p) {
    const name = p.filename || "attachment";
    const src = p.source || {};
    if (src.kind === "inline" && /^image\/(png|jpeg|gif|webp)$/.test(p.mime || "")) {
      return h("div", { class: "attach" }, "📎 ", name, h("br"), h("img", { src: `data:${p.mime};base64,${src.data}`, alt: name }));
    }
    return h("div", { class: "attach" }, "📎 ", name, h("span", { class: "dim" }, ` (${p.mime})`),
      src.kind === "url" ? h("span", { class: "dim mono" }, " ", src.url) : null);
  }

  const EDIT_PAIRS = [["old", "new"], ["old_string", "new_string"], ["oldString", "newString"], ["old_str", "new_str"], ["old_text", "new_text"], ["search", "replace"]];
  function filePath(input) {
    return input.path || input.file_path || input.filePath || input.target_file || input.filename || "";
  }
  /** A file edit of a tool's input as a diff, or null when the input is not one. */
  function editView(tool, input) {
    if (!input || typeof input !== "object") return null;
    const path = filePath(input);
    for (const [a, b] of EDIT_PAIRS) {
      if (typeof input[a] === "string" && typeof input[b] === "string") return diffView(path, input[a], input[b]);
    }
    if (Array.isArray(input.edits) && input.edits.length) {
      const views = input.edits.map((e) => {
        const pair = EDIT_PAIRS.find(([a, b]) => e && typeof e[a] === "string" && typeof e[b] === "string");
        return pair ? diffView(filePath(e) || path, e[pair[0]], e[pair[1]]) : null;
      }).filter(Boolean);
      if (views.length) return h("div", null, views);
    }
    const patch = [input.patch, input.diff, input.input].find((x) => typeof x === "string" && /^(\*\*\* Begin Patch|--- |diff --git|@@ )/m.test(x));
    if (patch) return patchView(patch);
    if (typeof input.content === "string" && path && /write|create/i.test(tool)) return diffView(path, "", input.content);
    return null;
  }
  function diffView(path, before, after) {
    const box = h("div", { class: "diff" });
    if (path) box.append(h("div", { class: "file" }, path));
    const parts = window.Diff ? window.Diff.diffLines(before, after) : [{ removed: true, value: before }, { added: true, value: after }];
    let shown = 0;
    for (const part of parts) {
      const lines = part.value.replace(/\n$/, "").split("\n");
      const cls = part.added ? "add" : part.removed ? "del" : "";
      const mark = part.added ? "+" : part.removed ? "-" : " ";
      // Long unchanged runs are folded to their ends.
      const keep = !cls && lines.length > 8 ? [...lines.slice(0, 3), null, ...lines.slice(-3)] : lines;
      for (const line of keep) {
        if (shown++ > 2000) break;
        box.append(line === null ? h("div", { class: "ln hunk" }, `   … ${lines.length - 6} unchanged lines`) : h("div", { class: "ln " + cls }, mark + " " + line));
      }
    }
    return box;
  }
  function patchView(text) {
    const box = h("div", { class: "diff" });
    for (const line of text.split("\n").slice(0, 3000)) {
      let cls = "";
      if (/^(\+\+\+|---|\*\*\*|diff --git)/.test(line)) cls = "file";
      else if (line.startsWith("@@")) cls = "hunk";
      else if (line.startsWith("+")) cls = "add";
      else if (line.startsWith("-")) cls = "del";
      box.append(h("div", { class: cls === "file" ? "file" : "ln " + cls }, line));
    }
    return box;
  }

  function renderTool(stored, p, children, openParts) {
    const state = p.state || {};
    const status = state.status || "pending";
    const input = p.input;
    const child = children.get(p.call_id);
    const short = state.title || shortInput(input);
    const edit = editView(p.tool || "", input);
    const body = [];
    if (child) body.push(h("div", null, "Sub-agent session: ", sessionLink(child), h("span", { class: "dim" }, ` · ${counted(child.message_count, "message")} · ${sessionCost(child)}`)));
    if (edit) body.push(h("div", { class: "label" }, "Edit"), edit);
    body.push(h("details", { class: "input", open: !edit }, h("summary", { class: "label" }, "Input"), codeBlock(JSON.stringify(input, null, 2), "json")));
    if (p.compacted_at) body.push(h("div", { class: "label" }, "Output"), h("div", { class: "dim" }, "(output cleared by compaction)"));
    else if (typeof state.output === "string") body.push(h("div", { class: "label" }, "Output"), outputView(p.tool || "", input, state.output));
    if (typeof state.message === "string") body.push(h("div", { class: "label" }, "Error"), h("pre", { class: "block plain msg-error" }, state.message));
    return foldable("tool", stored.id, openParts,
      h("span", null, "⚙ ", h("span", { class: "tool-name" }, p.tool), h("span", { class: "status " + status }, status),
        child ? h("span", { class: "badge" }, "sub-agent") : null,
        short ? h("span", { class: "dim" }, " " + short) : null),
      body);
  }
  /** A tool's output: highlighted when it reads a file whose extension names a language. */
  function outputView(tool, input, output) {
    const path = /read|view|cat|open|show/i.test(tool) && input && typeof input === "object" ? filePath(input) : "";
    const ext = (/\.([A-Za-z0-9]+)$/.exec(path) || [])[1];
    if (ext && output.length < 100000 && window.hljs && window.hljs.getLanguage(ext.toLowerCase())) return codeBlock(output, ext.toLowerCase());
    return h("pre", { class: "block plain" }, output);
  }
  function shortInput(input) {
    if (!input || typeof input !== "object") return input == null ? "" : String(input).slice(0, 100);
    const path = filePath(input);
    if (path) return path;
    for (const k of ["command", "description", "query", "pattern", "url", "prompt"]) {
      if (typeof input[k] === "string") return input[k].replace(/\s+/g, " ").slice(0, 100);
    }
    const text = JSON.stringify(input);
    return text.length > 100 ? text.slice(0, 99) + "…" : text;
  }

  // ---------------------------------------------------------------- search

  const SINCE = [["", "any time"], ["24h", "last 24 hours"], ["7d", "last 7 days"], ["30d", "last 30 days"], ["90d", "last 90 days"], ["365d", "last year"]];
  const ROLES = [["", "any role"], ["user", "user"], ["assistant", "assistant"], ["system", "system"], ["tool", "tool"]];

  async function showSearch() {
    const token = view.token;
    const p = params();
    const state = { q: p.get("q") || "", source: p.get("source") || "", exclude_source: p.get("exclude_source") || "",
      directory: p.get("directory") || "", role: p.get("role") || "", since: p.get("since") || "", session: p.get("session") || "" };
    const m = main();
    const input = h("input", { type: "search", id: "search-input", placeholder: "Words, \"a phrase\", fix*, -exclude, 中文", value: state.q, autocomplete: "off", "aria-label": "Search" });
    const filters = h("div", { class: "filters" });
    const status = h("div", { class: "dim", id: "search-status" });
    const leftOutSlot = h("div", { id: "left-out" });
    const hits = h("div", { class: "hits", id: "hits" });
    m.append(h("h1", null, "Search"), h("div", { class: "search-box" }, input), filters, status, leftOutSlot, hits);
    input.focus();
    input.setSelectionRange(input.value.length, input.value.length);

    let ctl = null;
    let timer = null;
    // `typing`: asked while the user types, so only the newest matches are ranked
    // (`rank=recent`, quick however much a short prefix matches); Enter, a filter or
    // opening the page ranks the whole history.
    // A live change re-asks the last question the same way (ranked among the newest matches
    // when it was asked while typing) and redraws the hits only if they changed, so a
    // focused or selected hit stays while an agent writes elsewhere.
    let lastTyping = false;
    let shownHits = null;
    async function run(typing, live) {
      if (live === true) typing = lastTyping;
      else lastTyping = typing === true;
      setParams(state);
      if (ctl) ctl.abort();
      if (!state.q.trim()) { hits.replaceChildren(); leftOutSlot.replaceChildren(); status.textContent = "Type to search every conversation."; setState("ready"); return; }
      ctl = new AbortController();
      const mine = ctl;
      setState("loading");
      const started = performance.now();
      try {
        const res = await api("search", { q: asTyped(state.q), source: state.source, exclude_source: state.exclude_source,
          directory: state.directory, role: state.role, since: state.since, session: state.session, limit: 50, rank: typing === true ? "recent" : "" }, mine.signal);
        if (!stillShown(token) || mine !== ctl) return;
        // What a hit shows (its rank moves with every message the store gains).
        const sig = JSON.stringify(res.hits.map((x) => ({ ...x, rank: null })));
        if (!(live === true && sig === shownHits)) hits.replaceChildren(...res.hits.map(renderHit));
        shownHits = sig;
        leftOutSlot.replaceChildren(...leftOutBox(res.left_out || [], "search hit"));
        const ms = Math.round(performance.now() - started);
        const scope = typing === true ? " · best of the newest matches, Enter ranks all" : "";
        const unread = (res.left_out || []).length ? "readable " : "";
        status.textContent = res.hits.length ? `${res.hits.length === 50 ? "50+ messages" : counted(res.hits.length, "message")} · ${ms} ms${scope}` : `No ${unread}matches for “${state.q}”${scope}`;
        setState("ready");
      } catch (err) {
        if (!isAbort(err) && stillShown(token)) { hits.replaceChildren(errorBox(err)); leftOutSlot.replaceChildren(); setState("error"); }
      }
    }
    input.addEventListener("input", () => { state.q = input.value; clearTimeout(timer); timer = setTimeout(() => run(true), 120); });
    input.addEventListener("keydown", (e) => { if (e.key === "Enter") { clearTimeout(timer); run(); } });
    const set = (k) => (v) => { state[k] = v; run(); };
    let c = { sources: [], directories: [] };
    try { c = await choices(); } catch (_) { /* the search works without */ }
    if (!stillShown(token)) return;
    const srcOpts = (all) => [["", all], ...c.sources.map((x) => [x.value, x.value])];
    // A directory from the address that no session names any more is still shown as chosen.
    const dirs = c.directories.map((x) => x.value);
    if (state.directory && !dirs.includes(state.directory)) dirs.unshift(state.directory);
    filters.append(
      select("source", "Source", srcOpts("all"), state.source, set("source")),
      select("exclude_source", "Not from", srcOpts("none"), state.exclude_source, set("exclude_source")),
      select("directory", "Directory", [["", "any"], ...dirs.map((d) => [d, d])], state.directory, set("directory")),
      select("role", "Role", ROLES, state.role, set("role")),
      select("since", "Since", SINCE, state.since, set("since")),
    );
    if (state.session) {
      filters.append(h("span", { class: "badge" }, "in one conversation ", h("span", { class: "mono" }, state.session.slice(0, 16)),
        " ", h("button", { onclick: (e) => { state.session = ""; e.target.parentElement.remove(); run(); }, title: "Search everywhere" }, "×")));
    }
    onChange(() => run(false, true));
    await run();
    restoreScroll(token);
    landFocus(token);
  }

  /**
   * What is sent while typing: the query as typed, except that a last word of three or
   * more letters that is still being typed also matches longer words (`conn` as `conn*`,
   * the CLI's prefix syntax), so results appear before a word is complete.
   */
  function asTyped(q) {
    const open = (q.match(/"/g) || []).length % 2 === 1;
    if (open || /[*\s"]$/.test(q)) return q;
    const last = (/[\p{L}\p{N}_]+$/u.exec(q) || [""])[0];
    if (last.length < 3 || /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}]/u.test(last)) return q;
    return q + "*";
  }

  function renderHit(hit) {
    const snippet = h("div", { class: "snippet", dir: "auto" });
    // Offsets count Unicode characters (code points), as the server does.
    const chars = Array.from(hit.snippet);
    let at = 0;
    for (const [start, end] of hit.highlights) {
      if (start > at) snippet.append(chars.slice(at, start).join(""));
      snippet.append(h("mark", null, chars.slice(start, end).join("")));
      at = end;
    }
    if (at < chars.length) snippet.append(chars.slice(at).join(""));
    return h("a", { class: "hit", href: `/s/${encodeURIComponent(hit.session_id)}#${hit.message_id}`, "data-link": true, dataset: { message: hit.message_id } },
      h("div", { class: "hit-head" },
        h("span", { class: "t" + (hit.title ? "" : " untitled") }, sessionName(hit.title, hit.preview)), " · ", hit.role, " · ", hit.source,
        hit.model ? " · " + hit.model : "", " · ", timeEl(hit.created_at)),
      snippet);
  }

  // ---------------------------------------------------------------- usage

  // [value, label, days (0: all), bars]: a year by week, all of time by what its length
  // suits (the server picks days, weeks or months).
  const PERIODS = [["7d", "7 days", 7, "day"], ["30d", "30 days", 30, "day"], ["90d", "90 days", 90, "day"], ["365d", "1 year", 365, "week"], ["all", "All time", 0, "auto"]];
  const DAY_MS = 86400e3;
  /** The key of the bar holding the UTC day `day` (`YYYY-MM-DD`) when bars are `step`s. */
  function barKey(day, step) {
    if (step === "month") return day.slice(0, 7);
    if (step !== "week") return day;
    const t = Date.parse(day + "T00:00:00Z");
    return new Date(t - ((new Date(t).getUTCDay() + 6) % 7) * DAY_MS).toISOString().slice(0, 10);
  }
  /** The key of the bar after `key`. */
  function nextBar(key, step) {
    if (step === "month") {
      const [y, mo] = key.split("-").map(Number);
      return mo === 12 ? `${String(y + 1).padStart(4, "0")}-01` : `${String(y).padStart(4, "0")}-${String(mo + 1).padStart(2, "0")}`;
    }
    return new Date(Date.parse(key + "T00:00:00Z") + (step === "week" ? 7 : 1) * DAY_MS).toISOString().slice(0, 10);
  }
  const STEP_NOTES = {
    day: "Days are UTC calendar days, as in scribe stats --by day.",
    week: "Weeks run Monday to Sunday (UTC), each shown by its Monday, as in scribe stats --by week.",
    month: "Months are UTC calendar months, as in scribe stats --by month.",
  };
  const PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f"];
  const OTHER = "#9aa0a6";

  async function showUsage() {
    const token = view.token;
    const p = params();
    const state = { period: p.get("period") || "30d", stack: p.get("stack") || "model", metric: p.get("metric") || "cost" };
    const m = main();
    const controls = h("div", { class: "filters" });
    const content = h("div");
    m.append(h("h1", null, "Usage"), controls, content);
    landFocus(token);
    const seg = (name, options, onpick) => h("div", { class: "seg", role: "group", "aria-label": name },
      options.map(([v, text]) => h("button", { class: state[name] === v ? "active" : "", dataset: { value: v }, onclick: () => onpick(v) }, text)));
    function drawControls() {
      controls.replaceChildren(
        seg("period", PERIODS.map(([v, t]) => [v, t]), (v) => { state.period = v; refresh(); }),
        seg("stack", [["model", "by model"], ["source", "by source"], ["directory", "by directory"]], (v) => { state.stack = v; refresh(); }),
        seg("metric", [["cost", "cost"], ["tokens", "tokens"]], (v) => { state.metric = v; refresh(); }));
    }
    function since() {
      const days = (PERIODS.find(([v]) => v === state.period) || PERIODS[1])[2];
      if (!days) return "";
      const d = new Date();
      const start = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate()) - (days - 1) * 86400e3;
      return new Date(start).toISOString().slice(0, 10);
    }
    // A live change leaves the controls (and the keyboard focus on them) alone and redraws
    // the numbers only when they changed.
    let shownData = null;
    async function refresh(live) {
      setParams(state);
      if (live !== true) drawControls();
      const mine = view.token;
      try {
        const from = since();
        const step = (PERIODS.find(([v]) => v === state.period) || PERIODS[1])[3];
        const [usage, stats] = await Promise.all([
          api("usage", { since: from, stack: state.stack, step }),
          api("stats", { by: state.stack, since: from }),
        ]);
        if (!stillShown(mine)) return;
        const sig = JSON.stringify([usage, stats, from, state]);
        if (!(live === true && sig === shownData)) render(usage, stats, from);
        shownData = sig;
        setState("ready");
      } catch (err) { if (stillShown(mine)) { content.replaceChildren(errorBox(err)); setState("error"); } }
    }
    function render(usage, stats, from) {
      const tot = usage.totals;
      const card = (k, v, title) => h("div", { class: "card", title }, h("div", { class: "v" }, v), h("div", { class: "k" }, k));
      const value = (t) => state.metric === "cost" ? t.cost_usd : t.tokens.total;
      const fmt = (v) => state.metric === "cost" ? fmtUsd(v) : fmtCompact(v);
      content.replaceChildren(
        h("div", { class: "cards" },
          card("cost" + (from ? " since " + from + " (UTC)" : ""), fmtCost(tot.cost_usd, tot.unpriced_sessions > 0),
            tot.unpriced_sessions > 0 ? `${UNPRICED} (${counted(tot.unpriced_sessions, "session")})` : undefined),
          card("tokens", fmtCompact(tot.tokens.total), tokensTitle(tot.tokens)),
          card("sessions", fmtInt(tot.sessions)),
          card("model calls", fmtInt(tot.api_calls)),
          usage.block ? blockCard(usage.block) : null),
        h("div", { class: "chart-wrap" }, chart(usage, from, value, fmt)),
        h("div", { class: "cols" },
          h("div", null, h("h2", null, `By ${state.stack}`), statsTable(stats)),
          h("div", null, h("h2", null, "Top sessions"), topTable(usage.top))));
    }
    // The 5-hour block open now (Claude's and Codex's subscription window), whatever the
    // period, as `scribe statusline` shows it: its cost so far and the time it has left.
    function blockCard(b) {
      const t = b.totals;
      const mins = Math.max(0, Math.ceil((b.end - Date.now()) / 60e3));
      const left = `${Math.floor(mins / 60)}h ${pad(mins % 60)}m`;
      return h("div", { class: "card", id: "block-card", title: `${fmtInt(t.tokens.total)} tokens, ${fmtDateTime(b.start)} to ${fmtDateTime(b.end)}` + (t.unpriced_sessions > 0 ? `; ${UNPRICED}` : "") },
        h("div", { class: "v" }, fmtCost(t.cost_usd, t.unpriced_sessions > 0)),
        h("div", { class: "k" }, `this 5-hour block (${left} left)`));
    }
    function chart(usage, from, value, fmt) {
      const keys = usage.keys.slice(0, PALETTE.length);
      const other = usage.keys.length > PALETTE.length;
      const colour = (k) => { const i = keys.indexOf(k); return i >= 0 ? PALETTE[i] : OTHER; };
      // Every day (week, month) of the period, with or without usage.
      const step = usage.step;
      const byDay = new Map(usage.days.map((d) => [d.day, d]));
      const days = [];
      const first = from ? barKey(from, step) : usage.days[0] && usage.days[0].day;
      if (first) {
        const today = barKey(new Date().toISOString().slice(0, 10), step);
        const newest = usage.days.length ? usage.days[usage.days.length - 1].day : today;
        const last = newest > today ? newest : today;
        for (let key = first; key <= last && days.length < 3700; key = nextBar(key, step)) days.push(key);
      }
      // Drawn at the width it is shown at, so text is not stretched.
      const W = Math.max(480, Math.min(1400, main().clientWidth - 24)), H = 280, L = 64, R = 12, T = 10, B = 26;
      const totals = days.map((d) => (byDay.has(d) ? value(byDay.get(d)) : 0));
      const max = Math.max(0, ...totals);
      const svg = s("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": `${state.metric} per ${step}, stacked by ${state.stack}` });
      if (!days.length || max <= 0) {
        svg.append(s("text", { x: W / 2, y: H / 2, "text-anchor": "middle" }, "No usage in this period"));
        return h("div", null, svg);
      }
      const plotW = W - L - R, plotH = H - T - B;
      for (const f of [0, 0.5, 1]) {
        const y = T + plotH * (1 - f);
        svg.append(s("line", { class: "grid", x1: L, x2: W - R, y1: y, y2: y }), s("text", { x: L - 6, y: y + 4, "text-anchor": "end" }, fmt(max * f)));
      }
      const bw = plotW / days.length;
      days.forEach((d, i) => {
        const day = byDay.get(d);
        if (!day) return;
        let y = T + plotH;
        for (const st of day.stacks) {
          const v = value(st);
          if (v <= 0) continue;
          const hgt = (v / max) * plotH;
          y -= hgt;
          svg.append(s("rect", { class: "bar", x: L + i * bw + bw * 0.1, y, width: Math.max(bw * 0.8, 0.5), height: hgt, fill: colour(st.key), "data-day": d, "data-key": st.key },
            s("title", null, `${d} · ${keyLabel(st.key)}: ${state.metric === "cost" ? fmtCost(v, st.unpriced_sessions > 0) : fmt(v)} · ${counted(st.sessions, "session")}`)));
        }
      });
      const label = (i, anchor) => s("text", { x: anchor === "start" ? L : anchor === "end" ? W - R : L + i * bw + bw / 2, y: H - 8, "text-anchor": anchor }, days[i]);
      svg.append(label(0, "start"));
      if (days.length > 2) svg.append(label(Math.floor(days.length / 2), "middle"));
      if (days.length > 1) svg.append(label(days.length - 1, "end"));
      const legend = h("div", { class: "legend" },
        keys.map((k) => h("span", { title: k }, h("span", { class: "sw", dataset: { colour: colour(k) } }), state.stack === "directory" && k ? shortPath(k) : keyLabel(k))),
        other ? h("span", null, h("span", { class: "sw", dataset: { colour: OTHER } }), "other") : null);
      for (const sw of legend.querySelectorAll(".sw")) sw.style.background = sw.dataset.colour;
      return h("div", null, svg, legend, h("p", { class: "dim chart-note" }, STEP_NOTES[step] || STEP_NOTES.day));
    }
    // A stack's or row's key as shown: a directory's sessions are a link to them.
    function keyLabel(k) {
      return k || ({ model: "(no model)", directory: "(no directory)" }[state.stack] || "(none)");
    }
    function keyCell(k) {
      if (state.stack !== "directory" || !k) return keyLabel(k);
      return h("a", { href: "/?directory=" + encodeURIComponent(k), "data-link": true, title: "Its sessions" }, k);
    }
    function statsTable(stats) {
      const row = (key, t, strong) => h("tr", { class: strong ? "total" : "" },
        h("td", null, strong ? h("b", null, key) : keyCell(key)),
        h("td", { class: "num" }, fmtInt(t.sessions)),
        h("td", { class: "num" }, fmtInt(t.api_calls)),
        ...usageCells(t.usage_recorded, t.tokens, t.cost_usd, t.unpriced_sessions > 0));
      return alignCosts(h("table", { id: "stats-table" },
        h("thead", null, h("tr", null, h("th", null, state.stack), h("th", { class: "num" }, "sessions"), h("th", { class: "num" }, "calls"), h("th", { class: "num" }, "tokens"), h("th", { class: "num" }, "cost"))),
        h("tbody", null, stats.rows.map((r) => row(r.key, r)), row("total", stats.totals, true))));
    }
    function topTable(top) {
      if (!top.length) return h("p", { class: "empty" }, "No sessions with a cost in this period.");
      // Ranked by what each conversation (with its sub-agents) cost in the period; its
      // tokens and cost of all time are on the row's title.
      return alignCosts(h("table", { id: "top-table" }, h("tbody", null, top.map((t) => h("tr", { title: `all time: ${fmtCompact(t.tokens.total)} tokens, ${fmtCost(t.cost_usd, t.cost_partial)}` },
        h("td", null, sessionLink(t), h("div", { class: "dim" }, t.source, t.model ? " · " + t.model : "", " · ", fmtDate(t.created_at))),
        h("td", { class: "num", title: tokensTitle(t.period.tokens) }, fmtCompact(t.period.tokens.total)),
        costCell(t.period.cost_usd, t.period.unpriced_sessions > 0))))));
    }
    onChange(() => refresh(true));
    await refresh();
  }

  // ---------------------------------------------------------------- start

  function start() {
    const quick = document.getElementById("quick-search");
    quick.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && quick.value.trim()) {
        navigate("/search?q=" + encodeURIComponent(quick.value.trim()));
        quick.value = "";
      }
    });
    quick.addEventListener("input", () => {
      if (location.pathname !== "/search" && quick.value.trim().length >= 2) {
        const q = quick.value;
        quick.value = "";
        navigate("/search?q=" + encodeURIComponent(q));
      }
    });
    document.addEventListener("keydown", (e) => {
      if (e.key === "/" && !/^(INPUT|SELECT|TEXTAREA)$/.test(document.activeElement.tagName)) {
        e.preventDefault();
        const box = document.getElementById("search-input") || quick;
        box.focus();
      }
    });
    if ("scrollRestoration" in history) history.scrollRestoration = "manual";
    startLive();
    route();
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
