// The pages' only stylesheet and script, served from /static (the Content-Security-Policy allows
// no inline script or style). Small on purpose: there is no front-end build.

export const APP_CSS = `
:root { --bg: #f5f6f8; --card: #fff; --ink: #1d2430; --muted: #5d6778; --line: #e2e5ea; --accent: #2f5bd3;
  --ok: #1d7a46; --ok-bg: #e3f4ea; --warn: #8a5a00; --warn-bg: #fdf2d8; --bad: #b3261e; --bad-bg: #fbe4e2; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--ink); font: 14px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
a { color: var(--accent); text-decoration: none; } a:hover { text-decoration: underline; }
header.top { display: flex; align-items: center; gap: 24px; padding: 0 24px; height: 52px; background: #1d2430; color: #fff; }
header.top .brand { color: #fff; font-weight: 700; font-size: 17px; letter-spacing: .3px; }
header.top nav { display: flex; gap: 16px; flex: 1; } header.top nav a { color: #c9d3e6; } header.top nav a.on { color: #fff; }
header.top .who { display: flex; align-items: center; gap: 12px; color: #c9d3e6; }
main { max-width: 1180px; margin: 0 auto; padding: 24px; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 0 0 12px; } h3 { font-size: 14px; margin: 16px 0 8px; }
.sub { color: var(--muted); margin: 0 0 20px; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 18px 20px; margin-bottom: 18px; }
.grid { display: grid; gap: 18px; } .grid.two { grid-template-columns: 1fr 1fr; } .grid.four { grid-template-columns: repeat(4, 1fr); } .grid.five { grid-template-columns: repeat(5, 1fr); }
@media (max-width: 860px) { .grid.two, .grid.four, .grid.five { grid-template-columns: 1fr; } }
.grid.tiles { margin-bottom: 18px; }
.tile { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 14px 16px; }
.tile .label { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .4px; }
.tile .value { font-size: 24px; font-weight: 600; margin-top: 2px; } .tile .note { color: var(--muted); font-size: 12px; }
.tile svg { display: block; margin-top: 6px; width: 100%; height: 40px; }
table { width: 100%; border-collapse: collapse; } th, td { text-align: left; padding: 7px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { color: var(--muted); font-weight: 600; font-size: 12px; text-transform: uppercase; letter-spacing: .3px; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr:last-child td { border-bottom: none; }
code, pre, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12.5px; }
pre { background: #f0f2f5; border: 1px solid var(--line); border-radius: 6px; padding: 12px 14px; overflow-x: auto; margin: 0; white-space: pre; }
td.query { max-width: 520px; } td.query code { display: block; white-space: pre-wrap; word-break: break-word; color: #39414f; }
.badge { display: inline-block; padding: 1px 9px; border-radius: 999px; font-size: 12px; font-weight: 600; white-space: nowrap; }
.badge.ok { background: var(--ok-bg); color: var(--ok); } .badge.off { background: #eceef2; color: var(--muted); }
.badge.warn { background: var(--warn-bg); color: var(--warn); } .badge.bad { background: var(--bad-bg); color: var(--bad); }
ul.preflight { margin: 0; padding: 0; list-style: none; } ul.preflight li { margin: 0 0 4px; }
.notice { border-radius: 8px; padding: 14px 16px; margin-bottom: 18px; border: 1px solid; }
.notice.ok { background: var(--ok-bg); border-color: #b9e0c8; } .notice.bad { background: var(--bad-bg); border-color: #f0c0bb; }
.notice.warn { background: var(--warn-bg); border-color: #f0dca8; }
.secret { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 14px; background: #fff; padding: 6px 10px; border-radius: 6px; border: 1px solid var(--line); display: inline-block; margin: 6px 0; word-break: break-all; }
form.stack label { display: block; margin-bottom: 12px; font-weight: 600; font-size: 13px; }
form.stack label span.hint { display: block; font-weight: 400; color: var(--muted); }
input[type=text], input[type=url], input[type=password], input[type=number], select, textarea { display: block; font-weight: 400; width: 100%; margin-top: 4px; padding: 7px 9px; border: 1px solid #c8cdd6; border-radius: 6px; font: inherit; background: #fff; }
textarea { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 13px; min-height: 84px; }
form.inline { display: inline; } .row { display: flex; gap: 12px; align-items: end; flex-wrap: wrap; } .row > label { flex: 1; min-width: 160px; }
label.check { display: flex; gap: 8px; align-items: center; font-weight: 400 !important; } label.check input { margin: 0; }
button, a.button { font: inherit; font-weight: 600; padding: 7px 14px; border-radius: 6px; border: 1px solid var(--accent); background: var(--accent); color: #fff; cursor: pointer; }
a.button { display: inline-block; text-decoration: none; }
button.secondary { background: #fff; color: var(--accent); } button.danger { background: #fff; color: var(--bad); border-color: #e3a9a4; }
button.link { background: none; border: none; color: #c9d3e6; padding: 0; font-weight: 400; } button.small { padding: 3px 10px; font-size: 12px; }
.snippet { position: relative; margin-bottom: 16px; } .snippet .copy { position: absolute; top: 8px; right: 8px; }
.muted { color: var(--muted); } .kv { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; } .kv dt { color: var(--muted); } .kv dd { margin: 0; }
.login { max-width: 380px; margin: 80px auto; }
.empty { color: var(--muted); padding: 12px 0; }
ol.steps { padding-left: 20px; } ol.steps > li { margin-bottom: 18px; } ol.steps > li::marker { font-weight: 700; }
.session-head { display: flex; justify-content: space-between; align-items: center; gap: 12px; flex-wrap: wrap; margin-bottom: 8px; }
.session-head .actions { display: flex; gap: 8px; }
.session .kv { margin: 10px 0 14px; } .session .kv dd .diff { margin-top: 2px; }
svg.session-chart { display: block; width: 100%; height: auto; margin: 6px 0 4px; }
.legend { font-size: 12px; margin-bottom: 14px; } .legend .key { display: inline-block; margin: 0 4px 0 12px; vertical-align: middle; }
.legend .key.dot { width: 8px; height: 8px; border-radius: 50%; background: #2f5bd3; margin-left: 0; }
.legend .key.best { width: 16px; height: 2px; background: #1d7a46; } .legend .key.base { width: 16px; border-top: 2px dashed #8a93a3; }
.legend .key.fail { color: var(--bad); font-weight: 700; }
.legend .key.square { width: 8px; height: 8px; background: #8a93a3; } .legend .key.ring { width: 6px; height: 6px; border-radius: 50%; border: 2px solid #2f5bd3; }
.legend .key.kept { width: 2px; height: 12px; border-left: 2px dotted #1d7a46; }
ol.session-steps { list-style: none; padding: 0; margin: 0 0 14px; }
ol.session-steps > li { border: 1px solid var(--line); border-left: 4px solid #c8cdd6; border-radius: 6px; padding: 8px 12px; margin-bottom: 8px; }
ol.session-steps > li.kept { border-left-color: var(--ok); background: #f4fbf6; } ol.session-steps .known-good { color: var(--ok); font-weight: 600; }
ol.session-steps .step-summary { margin: 2px 0; } ol.session-steps table.statements { margin-top: 6px; }
.small { font-size: 12px; } .diff { white-space: nowrap; }
details > summary { cursor: pointer; font-size: 12px; } #session-iterations td { font-size: 13px; }
`;

export const APP_JS = `
document.addEventListener('click', async (event) => {
  const button = event.target instanceof Element ? event.target.closest('[data-copy]') : null;
  if (!button) return;
  const source = document.getElementById(button.getAttribute('data-copy'));
  if (!source) return;
  try { await navigator.clipboard.writeText(source.textContent); button.textContent = 'Copied'; }
  catch { button.textContent = 'Select and copy'; }
  setTimeout(() => { button.textContent = 'Copy'; }, 1500);
});
document.addEventListener('submit', (event) => {
  const form = event.target;
  const question = form instanceof HTMLFormElement ? form.getAttribute('data-confirm') : null;
  if (question && !window.confirm(question)) event.preventDefault();
});
const kind = document.getElementById('command-kind');
if (kind) {
  const sync = () => document.querySelectorAll('[data-kind]').forEach((el) => { el.hidden = el.getAttribute('data-kind') !== kind.value; });
  kind.addEventListener('change', sync); sync();
}
`;

export const ICON_SVG = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="7" fill="#1d2430"/><path d="M7 22 L13 14 L18 18 L25 9" fill="none" stroke="#7fa2ff" stroke-width="3" stroke-linecap="round" stroke-linejoin="round"/></svg>`;
