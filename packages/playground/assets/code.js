// "Show me the code": the create request the form would send now, as a curl command and as a call of
// @genservice/client, for the caller to copy into a terminal or a program. The API key never appears in either: both
// read it from GENSERVICE_API_KEY.

/**
 * A string as one shell word in single quotes (a `'` inside becomes `'\''`), so no character of a prompt is
 * interpreted by the shell.
 * @param {string} s
 */
export function shellQuote(s) {
  return `'${s.replace(/'/g, "'\\''")}'`;
}

/**
 * A string as a TypeScript string literal in single quotes.
 * @param {string} s
 */
function tsString(s) {
  return `'${JSON.stringify(s).slice(1, -1).replace(/\\"/g, '"').replace(/'/g, "\\'")}'`;
}

/**
 * A JSON value (the settings) as a TypeScript literal: keys bare where they are identifiers, strings in single quotes.
 * @param {unknown} value
 * @param {string} indent
 * @returns {string}
 */
export function tsLiteral(value, indent = '') {
  if (typeof value === 'string') return tsString(value);
  if (Array.isArray(value)) return `[${value.map((v) => tsLiteral(v, indent)).join(', ')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value);
    if (!entries.length) return '{}';
    const inner = `${indent}  `;
    const lines = entries.map(([k, v]) => `${inner}${/^[A-Za-z_$][\w$]*$/.test(k) ? k : tsString(k)}: ${tsLiteral(v, inner)},`);
    return `{\n${lines.join('\n')}\n${indent}}`;
  }
  return JSON.stringify(value) ?? 'undefined';
}

/**
 * The curl command of `POST <base>/v1/generations` with this body.
 * @param {string} base the API's base URL, without a trailing slash (the mount point)
 * @param {{ modelId: string, settings: Record<string, unknown> }} body
 */
export function curlCommand(base, body) {
  return [
    `curl -s ${shellQuote(`${base}/v1/generations`)} \\`,
    '  -H "Authorization: Bearer $GENSERVICE_API_KEY" \\',
    "  -H 'Content-Type: application/json' \\",
    `  -d ${shellQuote(JSON.stringify(body))}`,
  ].join('\n');
}

/**
 * The same generation with `@genservice/client`: create it and wait for the result.
 * @param {string} base
 * @param {{ modelId: string, settings: Record<string, unknown> }} body
 */
export function clientCall(base, body) {
  return [
    "import { createClient } from '@genservice/client';",
    '',
    `const client = createClient({ baseUrl: ${tsString(base)}, apiKey: process.env.GENSERVICE_API_KEY! });`,
    '// Creates the generation and follows it to the end; throws GenerationFailedError if it fails.',
    'const done = await client.generations.run({',
    `  modelId: ${tsString(body.modelId)},`,
    `  settings: ${tsLiteral(body.settings, '  ')},`,
    '});',
    'console.log(done.result);',
  ].join('\n');
}

/**
 * Wires an ARIA tab list (`role="tab"` buttons, each `aria-controls` its panel): click or the arrow keys, Home and End
 * choose a tab; only the chosen one is in the Tab order. Returns `select(id)` for the page to switch tabs itself.
 * @param {HTMLElement} list
 * @returns {(id: string) => void}
 */
export function tabs(list) {
  const all = () => /** @type {HTMLElement[]} */ ([...list.querySelectorAll('[role="tab"]')]);
  const select = (id, focus = false) => {
    for (const tab of all()) {
      const chosen = tab.id === id;
      tab.setAttribute('aria-selected', String(chosen));
      tab.tabIndex = chosen ? 0 : -1;
      const panel = document.getElementById(tab.getAttribute('aria-controls') ?? '');
      if (panel) panel.hidden = !chosen;
      if (chosen && focus) tab.focus();
    }
  };
  list.addEventListener('click', (e) => {
    const tab = /** @type {HTMLElement} */ (e.target).closest('[role="tab"]');
    if (tab) select(tab.id);
  });
  list.addEventListener('keydown', (e) => {
    const tabs = all();
    const at = tabs.findIndex((t) => t.getAttribute('aria-selected') === 'true');
    const to = { ArrowRight: at + 1, ArrowLeft: at - 1, Home: 0, End: tabs.length - 1 }[e.key];
    if (to === undefined) return;
    e.preventDefault();
    select(tabs[(to + tabs.length) % tabs.length].id, true);
  });
  return (id) => select(id);
}
