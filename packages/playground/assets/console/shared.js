// What the console (index.html) and the user's page (me.html) share: the API client, the charts, tables, results.
// The pages talk to the service that serves them and to nothing else; the key lives in a variable of the page.

/** The mount point: `<mount>/console/` and `<mount>/console/me` both sit one level below it. */
export function apiBase() {
  return new URL('../', location.href);
}

/**
 * The one way to the API: the key is the page's in-memory value, sent as a Bearer header (never in a URL, never in
 * storage). Answers `{ ok, status, data, error }`; a network failure is status 0.
 */
export class Api {
  /** @param {() => string} key */
  constructor(key) {
    this.key = key;
    this.base = apiBase();
  }

  url(path) {
    return new URL(path, this.base).href;
  }

  async request(method, path, body) {
    // An id that is `.` or `..` is a dot segment even encoded: the URL would name another route (`users/./usage` is
    // `users/usage`, the account of a user called "usage"). No URL names such an id, so it is not asked for.
    if (path.split('?')[0].split('/').some((segment) => !addressable(segment))) {
      return { ok: false, status: 0, data: null, error: { code: 'unaddressable', message: 'An id that is "." or ".." cannot be named in a URL path: it cannot be read here.' } };
    }
    const headers = { authorization: `Bearer ${this.key()}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    let res;
    try {
      res = await fetch(this.url(path), { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: 'no-store' });
    } catch {
      return { ok: false, status: 0, data: null, error: { code: 'network', message: 'The service could not be reached.' } };
    }
    const text = await res.text();
    let data = null;
    try {
      data = text ? JSON.parse(text) : null;
    } catch {
      data = null;
    }
    const error = res.ok ? null : (data && typeof data.error === 'object' && data.error) || { code: `http_${res.status}`, message: `The service answered ${res.status}.` };
    return { ok: res.ok, status: res.status, data, error };
  }

  get(path) {
    return this.request('GET', path);
  }
}

/** Whether `id` (a user id, say) can be a path segment: not `.` or `..`, which a URL resolves away, encoded or not. */
export function addressable(id) {
  return !/^(?:\.|%2e){1,2}$/i.test(id);
}

/** Makes an element: `el('td', { class: 'n' }, 'text', child)`. Text is always text (never HTML). */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === 'on') for (const [ev, fn] of Object.entries(value)) node.addEventListener(ev, fn);
    else if (name === 'dataset') Object.assign(node.dataset, value);
    else node.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children.flat()) if (child !== null && child !== undefined && child !== false) node.append(child instanceof Node ? child : String(child));
  return node;
}

/** A table with a caption, header cells and rows of cells (strings or nodes). */
export function table(caption, headers, rows, attrs = {}) {
  return el(
    'table',
    attrs,
    el('caption', {}, caption),
    el('thead', {}, el('tr', {}, headers.map((h) => el('th', { scope: 'col' }, h)))),
    el('tbody', {}, rows.map((cells) => el('tr', {}, cells.map((c) => el('td', {}, c))))),
  );
}

export function number(n) {
  return typeof n === 'number' ? n.toLocaleString('en-US') : '';
}

export function when(iso) {
  return iso ? iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z') : '';
}

/** A URL on http(s), else null: only these become media sources (a result is never a `javascript:` link). */
export function httpUrl(value) {
  if (typeof value !== 'string') return null;
  try {
    const url = new URL(value);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.href : null;
  } catch {
    return null;
  }
}

/**
 * A generation's result as the log shows it: a thumbnail for an image, a player for video and audio, a line of text,
 * a link for a 3D file, the reason of a failure.
 */
export function resultPreview(item, resultType) {
  if (item.status === 'failed') return el('span', { class: 'failure' }, item.error?.message ?? item.failureReason ?? 'failed');
  if (item.status !== 'completed') return el('span', { class: 'muted' }, item.status);
  const type = resultType ?? guessType(item.result);
  if (type === 'text') return el('span', { class: 'text-result' }, String(item.result ?? '').slice(0, 120));
  const url = httpUrl(item.result);
  if (!url) return el('span', {}, String(item.result ?? ''));
  if (type === 'image') return el('img', { class: 'thumb', src: url, alt: `Result of ${item.generationId}`, loading: 'lazy', width: 64, height: 64 });
  if (type === 'video') return el('video', { class: 'thumb', src: url, controls: true, muted: true, preload: 'metadata', 'aria-label': `Video result of ${item.generationId}` });
  if (type === 'audio') return el('audio', { src: url, controls: true, preload: 'none', 'aria-label': `Audio result of ${item.generationId}` });
  return el('a', { href: url, download: '' }, `Download (${type ?? 'file'})`);
}

function guessType(result) {
  if (typeof result !== 'string' || !httpUrl(result)) return 'text';
  return undefined;
}

/**
 * Rows as CSV (RFC 4180 quoting), header first. A text cell that a spreadsheet would read as a formula (it starts with
 * `=`, `+`, `-`, `@`, a tab or a CR: a user id or a model id is anyone's string) is prefixed with `'` (OWASP's CSV
 * injection advice); numbers are written as they are.
 */
export function csv(headers, rows) {
  const cell = (v) => {
    let s = v === null || v === undefined ? '' : String(v);
    if (typeof v !== 'number' && /^[=+\-@\t\r]/.test(s)) s = `'${s}`;
    return /[",\n\r]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
  };
  return [headers, ...rows].map((r) => r.map(cell).join(',')).join('\r\n') + '\r\n';
}

/** Offers `text` as a download named `name` (a blob URL on the page's own origin). */
export function download(name, text, type = 'text/csv') {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = el('a', { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

const COLOURS = ['#1747b8', '#b8460b', '#0f6632', '#7a2a9a', '#8a6d00', '#00707a', '#a3001b', '#4d5560'];

/**
 * A Chart.js 4 chart on `canvas` (its UMD build, served by the service as `chart.js`), replacing any chart there.
 * `series` is `[{ label, values }]` over `labels`; tokens as bars, generations (when given) as a line on a second axis.
 */
export function drawChart(canvas, labels, series, options = {}) {
  const Chart = globalThis.Chart;
  if (!Chart) return null;
  Chart.getChart(canvas)?.destroy();
  const datasets = series.map((s, i) => ({
    type: s.line ? 'line' : 'bar',
    label: s.label,
    data: s.values,
    backgroundColor: COLOURS[i % COLOURS.length],
    borderColor: COLOURS[i % COLOURS.length],
    yAxisID: s.line ? 'y1' : 'y',
    stack: s.line ? undefined : 'tokens',
  }));
  const hasLine = series.some((s) => s.line);
  return new Chart(canvas, {
    data: { labels, datasets },
    options: {
      animation: false,
      responsive: true,
      maintainAspectRatio: false,
      plugins: { legend: { position: 'bottom' }, title: { display: Boolean(options.title), text: options.title } },
      scales: {
        x: { stacked: true },
        y: { stacked: true, beginAtZero: true, title: { display: true, text: options.yTitle ?? 'tokens' } },
        ...(hasLine ? { y1: { position: 'right', beginAtZero: true, grid: { drawOnChartArea: false }, title: { display: true, text: 'generations' } } } : {}),
      },
    },
  });
}

/** The UTC days from `from` to `to` (both `YYYY-MM-DD`), in order. */
export function days(from, to) {
  const out = [];
  for (let t = Date.parse(`${from}T00:00:00Z`); t <= Date.parse(`${to}T00:00:00Z`); t += 86_400_000) out.push(new Date(t).toISOString().slice(0, 10));
  return out;
}

export function today(offsetDays = 0) {
  return new Date(Date.now() + offsetDays * 86_400_000).toISOString().slice(0, 10);
}

/** Shows `message` in the status element `node` (a polite live region), as an error or not. */
export function say(node, message, isError = false) {
  node.textContent = message;
  node.classList.toggle('error', isError);
}

/**
 * Webhook endpoints and their deliveries, on either page: `base` is the endpoints' collection path (the user's own
 * `v1/webhook-endpoints`, or the admin's `v1/admin/users/{id}/webhook-endpoints`). Picks an endpoint, lists its
 * deliveries with every attempt, and replays one.
 */
export class DeliveriesPanel {
  /** @param {Api} api @param {{ endpoints: HTMLElement, deliveries: HTMLElement, status: HTMLElement }} nodes */
  constructor(api, nodes) {
    this.api = api;
    this.nodes = nodes;
    this.base = null;
    this.endpointId = null;
  }

  async show(base) {
    this.base = base;
    const res = await this.api.get(base);
    if (!res.ok) {
      this.nodes.endpoints.replaceChildren();
      this.nodes.deliveries.replaceChildren();
      return say(this.nodes.status, res.status === 404 ? 'This service has no webhook endpoints.' : res.error.message, res.status !== 404);
    }
    const endpoints = res.data.data;
    if (!endpoints.some((e) => e.id === this.endpointId)) this.endpointId = endpoints[0]?.id ?? null;
    this.nodes.endpoints.replaceChildren(
      table('Webhook endpoints', ['URL', 'Events', 'Status', 'Deliveries'], endpoints.map((e) => [
        el('code', {}, e.url),
        e.events.join(', '),
        el('span', { class: `endpoint ${e.status}` }, e.status === 'disabled' ? `disabled ${when(e.disabledAt)}` : 'enabled'),
        el('button', { type: 'button', on: { click: () => { this.endpointId = e.id; this.deliveries(); } } }, 'Show', el('span', { class: 'sr-only' }, ` deliveries of ${e.url}`)),
      ]), { id: 'endpoints' }),
    );
    if (endpoints.length === 0) say(this.nodes.status, 'No webhook endpoints.');
    await this.deliveries();
  }

  async deliveries() {
    if (!this.endpointId) return this.nodes.deliveries.replaceChildren();
    const res = await this.api.get(`${this.base}/${encodeURIComponent(this.endpointId)}/deliveries`);
    if (!res.ok) return say(this.nodes.status, res.error.message, true);
    const rows = res.data.data.map((d) => [
      el('code', {}, d.id),
      d.type,
      d.generationId ? el('code', {}, d.generationId) : '',
      el('span', { class: `delivery ${d.state}` }, d.state),
      el('ul', { class: 'attempts' }, d.attempts.map((a) => el('li', {}, `${a.status ?? a.error ?? 'no answer'} in ${number(a.durationMs)} ms at ${when(a.at)}`))),
      when(d.nextAttemptAt) || '',
      el('button', { type: 'button', on: { click: () => this.replay(d.id) } }, 'Replay', el('span', { class: 'sr-only' }, ` ${d.id}`)),
    ]);
    this.nodes.deliveries.replaceChildren(
      table('Deliveries, newest first', ['Delivery (webhook-id)', 'Event', 'Generation', 'State', 'Attempts', 'Next attempt', 'Action'], rows, { id: 'deliveries' }),
    );
    say(this.nodes.status, `${rows.length} deliver${rows.length === 1 ? 'y' : 'ies'}.`);
  }

  async replay(deliveryId) {
    const res = await this.api.request('POST', `${this.base}/${encodeURIComponent(this.endpointId)}/deliveries/${encodeURIComponent(deliveryId)}/replay`);
    if (!res.ok) return say(this.nodes.status, res.error.message, true);
    say(this.nodes.status, `Replaying ${deliveryId}.`);
    await this.deliveries();
  }
}
