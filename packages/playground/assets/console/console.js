// The operator console: signed in with an admin key (kept in this module's memory only), it reads and changes the
// service through the documented admin API (docs/console.md) and nothing else.
import { addressable, Api, csv, days, DeliveriesPanel, download, drawChart, el, number, resultPreview, say, table, today, when } from './shared.js';

let adminKey = '';
const api = new Api(() => adminKey);
/** Users known to the console: every user the audit log names, and those created here. */
const users = new Set();
/** Model id -> result type, for showing results. */
const resultTypes = new Map();

const $ = (id) => document.getElementById(id);

$('signin').addEventListener('submit', async (e) => {
  e.preventDefault();
  adminKey = $('admin-key').value.trim();
  const probe = await api.get('v1/admin/queue');
  if (!probe.ok) {
    adminKey = '';
    say($('signin-status'), probe.status === 401 ? 'That is not an admin key of this service.' : probe.error.message, true);
    $('admin-key').setAttribute('aria-invalid', 'true');
    return;
  }
  $('admin-key').removeAttribute('aria-invalid');
  $('admin-key').value = '';
  say($('signin-status'), 'Signed in.');
  $('signin').hidden = true;
  $('signout').hidden = false;
  document.body.classList.add('signed-in');
  for (const s of document.querySelectorAll('.needs-key')) s.hidden = false;
  $('usage-from').value = today(-29);
  $('usage-to').value = today();
  await loadModels();
  await refreshUsers();
  await Promise.all([refreshUsage(), refreshLog(), refreshQueue()]);
});

$('signout').addEventListener('click', () => {
  adminKey = '';
  location.reload();
});

/** Every model served, with its result type: the queue-health answer lists them all (zeros included). */
async function loadModels() {
  const res = await api.get('v1/admin/queue');
  for (const m of res.data?.models ?? []) if (m.resultType) resultTypes.set(m.modelId, m.resultType);
  $('log-models').replaceChildren(...[...resultTypes.keys()].map((id) => el('option', { value: id })));
}

// ---- Users -------------------------------------------------------------------------------------------------------

/** Organisations the audit log names (`organization.create`), when the service has organisation routes. */
const organizations = new Set();

async function refreshUsers() {
  // Every account the ledger holds (GET /v1/admin/users); the audit log adds users of a ledger that cannot list them,
  // and names the organisations.
  let next = null;
  for (let page = 0; page < 10; page++) {
    const res = await api.get(`v1/admin/users?limit=200${next ? `&cursor=${encodeURIComponent(next)}` : ''}`);
    if (!res.ok) break;
    for (const u of res.data.data) users.add(u.userId);
    next = res.data.nextCursor;
    if (!next) break;
  }
  let cursor = null;
  for (let page = 0; page < 10; page++) {
    const res = await api.get(`v1/admin/audit?limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    if (!res.ok) break;
    for (const entry of res.data.data) {
      if (entry.userId) users.add(entry.userId);
      if (entry.action === 'organization.create' && typeof entry.details?.organizationId === 'string') organizations.add(entry.details.organizationId);
    }
    cursor = res.data.nextCursor;
    if (!cursor) break;
  }
  await refreshOrganizations();
  const rows = [];
  for (const userId of [...users].sort()) {
    const res = await api.get(`v1/admin/users/${encodeURIComponent(userId)}`);
    if (!res.ok) continue;
    const u = res.data;
    rows.push([u.userId, number(u.balance), number(u.reserved), number(u.settled), String(u.keys.length)]);
  }
  $('users-table').replaceChildren(table('Users and their balances (tokens)', ['User', 'Balance', 'Reserved', 'Spent', 'Keys'], rows, { id: 'users' }));
  for (const select of [$('keys-user'), $('log-user'), $('usage-user'), $('hooks-user')]) {
    const chosen = select.value;
    const first = select.id === 'keys-user' || select.id === 'hooks-user' ? [] : [el('option', { value: '' }, 'All users')];
    select.replaceChildren(...first, ...[...users].sort().map((u) => el('option', { value: u }, u)));
    if ([...select.options].some((o) => o.value === chosen)) select.value = chosen;
  }
  await refreshKeys();
  await refreshHooks();
}

$('user-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  const userId = $('new-user').value.trim();
  const balance = $('new-balance').value === '' ? undefined : Number($('new-balance').value);
  const res = await api.request('POST', 'v1/admin/users', { userId, ...(balance !== undefined ? { balance } : {}) });
  if (!res.ok) return say($('user-status'), res.error.message, true);
  say($('user-status'), `Created ${userId} with ${number(res.data.balance)} tokens.`);
  users.add(userId);
  $('new-user').value = '';
  $('new-balance').value = '';
  await refreshUsers();
  $('keys-user').value = userId;
  await refreshKeys();
});

$('credit-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  const userId = $('keys-user').value;
  const res = await api.request('POST', `v1/admin/users/${encodeURIComponent(userId)}/credits`, { amount: Number($('credit-amount').value), reason: $('credit-reason').value });
  if (!res.ok) return say($('credit-status'), res.error.message, true);
  say($('credit-status'), `${userId} now has ${number(res.data.balance)} tokens.`);
  await refreshUsers();
});

/**
 * Organisations with their budgets, spend, in-flight count and members: shown when the service's OpenAPI document
 * has the organisation routes (`GET /v1/admin/organizations/{organizationId}`), else a line saying it has none.
 */
async function refreshOrganizations() {
  const doc = await api.get('v1/openapi.json');
  if (!doc.ok || !doc.data?.paths?.['/v1/admin/organizations/{organizationId}']) {
    $('orgs-table').replaceChildren();
    return say($('orgs-status'), 'Organisations: this service has no organisation routes.');
  }
  const rows = [];
  for (const id of [...organizations].sort()) {
    const res = await api.get(`v1/admin/organizations/${encodeURIComponent(id)}`);
    if (!res.ok) continue;
    const o = res.data;
    rows.push([
      o.organizationId,
      o.budget ? `${number(o.budget.amount)} / ${o.budget.period}` : 'none',
      o.budget ? number(o.spent ?? 0) : '',
      o.budget ? number(o.remaining ?? 0) : '',
      `${number(o.inFlight)}${o.maxInFlight ? ` of ${number(o.maxInFlight)}` : ''}`,
      String(o.weight),
      (o.members ?? []).map((m) => `${m.userId}${m.role === 'admin' ? ' (admin)' : ''}`).join(', '),
    ]);
  }
  $('orgs-table').replaceChildren(
    table('Organisations', ['Organisation', 'Budget', 'Spent this period', 'Left', 'In flight', 'Weight', 'Members'], rows, { id: 'orgs' }),
  );
  say($('orgs-status'), `${rows.length} organisation${rows.length === 1 ? '' : 's'}.`);
}

// ---- Keys --------------------------------------------------------------------------------------------------------

$('keys-user').addEventListener('change', () => refreshKeys());
$('keys-reload').addEventListener('click', () => refreshUsers());

async function refreshKeys() {
  const userId = $('keys-user').value;
  $('keys-for').textContent = userId || 'no user chosen';
  if (!userId) return $('keys-table').replaceChildren();
  const [user, spend] = await Promise.all([
    api.get(`v1/admin/users/${encodeURIComponent(userId)}`),
    api.get(`v1/admin/users/${encodeURIComponent(userId)}/usage?groupBy=key`),
  ]);
  if (!user.ok) return say($('keys-status'), user.error.message, true);
  const spent = new Map((spend.data?.data ?? []).map((r) => [r.keyId, r.tokens]));
  const rows = user.data.keys.map((k) => [
    k.name,
    el('code', {}, k.keyId),
    k.scopes.join(', '),
    k.budget ? `${number(k.budget.amount)} / ${k.budget.period}` : 'none',
    k.budget ? number(k.budgetSpent ?? 0) : '',
    number(spent.get(k.keyId) ?? 0),
    when(k.lastUsedAt) || 'never',
    el('button', { type: 'button', class: 'danger', on: { click: () => revoke(k) } }, `Revoke ${k.name}`),
  ]);
  $('keys-table').replaceChildren(
    table(`Keys of ${userId}`, ['Name', 'Key id', 'Scopes', 'Budget', 'Spent this period', 'Spent (30 days)', 'Last used', 'Action'], rows, { id: 'keys' }),
  );
}

async function revoke(key) {
  if (!confirm(`Revoke the key "${key.name}"? Its next request fails.`)) return;
  const res = await api.request('DELETE', `v1/admin/keys/${encodeURIComponent(key.keyId)}`);
  if (!res.ok) return say($('keys-status'), res.error.message, true);
  say($('keys-status'), `Revoked ${key.name}.`);
  await refreshKeys();
}

$('key-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  const userId = $('keys-user').value;
  const scopes = [...document.querySelectorAll('input[name="scope"]:checked')].map((i) => i.value);
  const amount = $('key-budget').value;
  const body = { name: $('key-name').value.trim(), scopes };
  if (amount !== '') body.budget = { amount: Number(amount), period: $('key-period').value };
  const res = await api.request('POST', `v1/admin/users/${encodeURIComponent(userId)}/keys`, body);
  if (!res.ok) {
    $('key-secret').textContent = '';
    return say($('keys-status'), res.error.message, true);
  }
  say($('keys-status'), `Created the key ${res.data.name}. Copy its secret now: it is not shown again.`);
  $('key-secret').textContent = res.data.apiKey;
  $('key-name').value = '';
  await refreshKeys();
});

// ---- Usage -------------------------------------------------------------------------------------------------------

let usageRows = [];
let breakdownRows = [];

$('usage-form').addEventListener('submit', (e) => {
  e.preventDefault();
  refreshUsage();
});

async function refreshUsage() {
  const from = $('usage-from').value;
  const to = $('usage-to').value;
  const by = $('usage-by').value;
  const chosen = $('usage-user').value;
  // "All users" leaves out ids no URL can name (`.`, `..`): their rows cannot be read, the others' still are.
  const who = chosen ? [chosen] : [...users].filter(addressable).sort();
  const range = `from=${from}&to=${to}`;
  const perDay = [];
  const breakdown = new Map();
  for (const userId of who) {
    const base = `v1/admin/users/${encodeURIComponent(userId)}/usage?${range}`;
    const [daily, grouped] = await Promise.all([api.get(`${base}&groupBy=day`), by === 'user' ? null : api.get(`${base}&groupBy=${by}`)]);
    if (!daily.ok) return say($('usage-status'), daily.error.message, true);
    for (const r of daily.data.data) perDay.push({ day: r.period, userId, count: r.count, tokens: r.tokens });
    if (by === 'user') breakdown.set(userId, { count: daily.data.total.count, tokens: daily.data.total.tokens });
    else
      for (const r of grouped.data.data) {
        const name = (by === 'model' ? r.modelId : r.keyId) ?? '(none)';
        const b = breakdown.get(name) ?? { count: 0, tokens: 0 };
        b.count += r.count;
        b.tokens += r.tokens;
        breakdown.set(name, b);
      }
  }
  const labels = days(from, to);
  const series = who
    .map((userId) => ({ label: userId, values: labels.map((d) => perDay.find((r) => r.day === d && r.userId === userId)?.tokens ?? 0) }))
    .filter((s) => s.values.some((v) => v > 0));
  series.push({ label: 'generations', line: true, values: labels.map((d) => perDay.filter((r) => r.day === d).reduce((n, r) => n + r.count, 0)) });
  drawChart($('usage-daily'), labels, series, { title: 'Tokens per day by user, and generations' });
  const names = [...breakdown.keys()].sort();
  drawChart($('usage-breakdown'), names, [
    { label: 'tokens', values: names.map((n) => breakdown.get(n).tokens) },
    { label: 'generations', line: true, values: names.map((n) => breakdown.get(n).count) },
  ], { title: `Tokens and generations by ${by}` });
  usageRows = perDay.sort((a, b) => a.day.localeCompare(b.day) || a.userId.localeCompare(b.userId)).map((r) => [r.day, r.userId, r.count, r.tokens]);
  breakdownRows = names.map((n) => [n, breakdown.get(n).count, breakdown.get(n).tokens]);
  $('usage-daily-table').replaceChildren(table('Per day and user', ['Day', 'User', 'Generations', 'Tokens'], usageRows.map((r) => r.map(String)), { id: 'usage-days' }));
  $('usage-breakdown-table').replaceChildren(table(`By ${by}`, [by[0].toUpperCase() + by.slice(1), 'Generations', 'Tokens'], breakdownRows.map((r) => r.map(String)), { id: 'usage-groups' }));
  const total = perDay.reduce((t, r) => ({ count: t.count + r.count, tokens: t.tokens + r.tokens }), { count: 0, tokens: 0 });
  say($('usage-status'), `${number(total.count)} generations, ${number(total.tokens)} tokens from ${from} to ${to}.`);
}

$('usage-csv').addEventListener('click', () => {
  const by = $('usage-by').value;
  const text = csv(['day', 'user', 'generations', 'tokens'], usageRows) + '\r\n' + csv([by, 'generations', 'tokens'], breakdownRows);
  download(`usage-${$('usage-from').value}-${$('usage-to').value}.csv`, text);
});

// ---- Generation log ----------------------------------------------------------------------------------------------

$('log-form').addEventListener('submit', (e) => {
  e.preventDefault();
  refreshLog();
});

async function refreshLog() {
  const chosen = $('log-user').value;
  const model = $('log-model').value.trim();
  const status = $('log-status').value;
  const since = $('log-since').value ? Date.parse(`${$('log-since').value}Z`) : null;
  const until = $('log-until').value ? Date.parse(`${$('log-until').value}Z`) : null;
  const query = new URLSearchParams({ limit: '50' });
  if (model) query.set('modelId', model);
  if (status) query.set('status', status);
  const items = [];
  for (const userId of chosen ? [chosen] : [...users].filter(addressable).sort()) {
    const res = await api.get(`v1/admin/users/${encodeURIComponent(userId)}/generations?${query}`);
    if (!res.ok) return say($('log-status-line'), res.error.message, true);
    for (const item of res.data.data) items.push({ ...item, userId });
  }
  const shown = items
    .filter((i) => (since === null || Date.parse(i.createdAt) >= since) && (until === null || Date.parse(i.createdAt) <= until))
    .sort((a, b) => b.createdAt.localeCompare(a.createdAt))
    .slice(0, 100);
  const rows = shown.map((i) => [
    resultPreview(i, resultTypes.get(i.modelId)),
    i.userId,
    i.modelId,
    el('span', { class: `status ${i.status}` }, i.status),
    number(i.price ?? i.reserved ?? 0),
    when(i.createdAt),
    el('button', { type: 'button', on: { click: () => openDetails(i.userId, i.generationId) } }, 'Details', el('span', { class: 'sr-only' }, ` of ${i.generationId}`)),
  ]);
  $('log-table').replaceChildren(table('Generations, newest first', ['Result', 'User', 'Model', 'Status', 'Tokens', 'Created (UTC)', 'More'], rows, { id: 'log' }));
  say($('log-status-line'), `${shown.length} generation${shown.length === 1 ? '' : 's'}.`);
}

async function openDetails(userId, generationId) {
  const res = await api.get(`v1/admin/users/${encodeURIComponent(userId)}/generations/${encodeURIComponent(generationId)}`);
  if (!res.ok) return say($('log-status-line'), res.error.message, true);
  const { generation, events } = res.data;
  $('details-title').textContent = `Generation ${generation.generationId}`;
  $('details-body').replaceChildren(
    el('div', { class: 'details-result' }, resultPreview(generation, resultTypes.get(generation.modelId))),
    el('pre', { class: 'json', tabindex: '0', 'aria-label': 'The generation' }, JSON.stringify(generation, null, 2)),
    table('Events', ['#', 'Type', 'At (UTC)', 'Data'], events.map((ev) => [String(ev.seq), ev.type, when(ev.at), el('code', {}, JSON.stringify(ev.data))]), { id: 'events' }),
  );
  $('details').showModal();
}

$('details-close').addEventListener('click', () => $('details').close());

// ---- Queue -------------------------------------------------------------------------------------------------------

$('queue-refresh').addEventListener('click', () => refreshQueue());

async function refreshQueue() {
  const res = await api.get('v1/admin/queue');
  if (!res.ok) return say($('queue-status'), res.error.message, true);
  const q = res.data;
  $('queue-summary').replaceChildren(
    el('dl', { class: 'facts' },
      el('dt', {}, 'Pending'), el('dd', { id: 'queue-pending' }, number(q.total.pending)),
      el('dt', {}, 'Running'), el('dd', { id: 'queue-running' }, number(q.total.running)),
      el('dt', {}, 'Oldest waiting'), el('dd', {}, q.oldestPendingAt ? `${when(q.oldestPendingAt)} (${number(q.oldestPendingSeconds)} s)` : 'none'),
      el('dt', {}, 'Failures, last hour'), el('dd', { id: 'queue-failures' }, number(q.failuresLastHour)),
    ),
  );
  const byProvider = new Map();
  for (const m of q.models) {
    const p = byProvider.get(m.provider) ?? { pending: 0, running: 0 };
    p.pending += m.pending;
    p.running += m.running;
    byProvider.set(m.provider, p);
  }
  $('queue-table').replaceChildren(
    table('Per model', ['Model', 'Provider', 'Pending', 'Running', 'Oldest waiting (UTC)'], q.models.map((m) => [m.modelId, m.provider, String(m.pending), String(m.running), when(m.oldestPendingAt) || 'none'])),
    table('Per provider', ['Provider', 'Pending', 'Running'], [...byProvider].map(([p, c]) => [p, String(c.pending), String(c.running)])),
  );
  say($('queue-status'), `Read at ${new Date().toISOString().slice(11, 19)} UTC${q.truncated ? ` (the oldest ${q.scanned} only)` : ''}.`);
}

// ---- Webhook deliveries ------------------------------------------------------------------------------------------

const hooks = new DeliveriesPanel(api, { endpoints: $('hooks-endpoints'), deliveries: $('hooks-deliveries'), status: $('hooks-status') });

async function refreshHooks() {
  const userId = $('hooks-user').value;
  if (!userId) return;
  await hooks.show(`v1/admin/users/${encodeURIComponent(userId)}/webhook-endpoints`);
}

$('hooks-user').addEventListener('change', () => refreshHooks());
$('hooks-reload').addEventListener('click', () => refreshHooks());
