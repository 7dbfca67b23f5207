// The user's own page: signed in with their API key (kept in this module's memory only), it reads the user routes
// of the API (balance, usage, keys, generations) and nothing else.
import { Api, csv, days, DeliveriesPanel, download, drawChart, el, number, resultPreview, say, table, today, when } from './shared.js';

let apiKey = '';
const api = new Api(() => apiKey);
const resultTypes = new Map();
let cursor = null;
let dailyRows = [];
let modelRows = [];

const $ = (id) => document.getElementById(id);
const hooks = new DeliveriesPanel(api, { endpoints: $('hooks-endpoints'), deliveries: $('hooks-deliveries'), status: $('hooks-status') });
$('hooks-reload').addEventListener('click', () => hooks.show('v1/webhook-endpoints'));

$('signin').addEventListener('submit', async (e) => {
  e.preventDefault();
  apiKey = $('api-key').value.trim();
  const balance = await api.get('v1/balance');
  if (!balance.ok) {
    apiKey = '';
    $('api-key').setAttribute('aria-invalid', 'true');
    return say($('signin-status'), balance.status === 401 ? 'That key is not valid here.' : balance.error.message, true);
  }
  $('api-key').removeAttribute('aria-invalid');
  $('api-key').value = '';
  say($('signin-status'), 'Signed in.');
  $('signin').hidden = true;
  $('signout').hidden = false;
  for (const s of document.querySelectorAll('.needs-key')) s.hidden = false;
  $('balance').textContent = number(balance.data.balance);
  $('usage-from').value = today(-29);
  $('usage-to').value = today();
  const models = await api.get('v1/models');
  for (const m of models.data?.models ?? []) resultTypes.set(m.modelId, m.resultType);
  await Promise.all([refreshKeys(), refreshUsage(), refreshGenerations(true), hooks.show('v1/webhook-endpoints')]);
});

$('signout').addEventListener('click', () => {
  apiKey = '';
  location.reload();
});

async function refreshKeys() {
  const res = await api.get('v1/keys');
  if (!res.ok) {
    $('keys-table').replaceChildren(el('p', { class: 'muted' }, res.status === 403 ? 'Your key may not read keys (it lacks the read scope).' : res.error.message));
    return;
  }
  const rows = res.data.data.map((k) => [
    k.name,
    k.scopes.join(', '),
    k.budget ? `${number(k.budget.amount)} / ${k.budget.period}` : 'none',
    k.budget ? number(k.budgetSpent ?? 0) : '',
    when(k.lastUsedAt) || 'never',
  ]);
  $('keys-table').replaceChildren(table('Your keys', ['Name', 'Scopes', 'Budget', 'Spent this period', 'Last used'], rows, { id: 'keys' }));
}

$('usage-form').addEventListener('submit', (e) => {
  e.preventDefault();
  refreshUsage();
});

async function refreshUsage() {
  const from = $('usage-from').value;
  const to = $('usage-to').value;
  const [daily, byModel] = await Promise.all([api.get(`v1/usage?from=${from}&to=${to}&groupBy=day`), api.get(`v1/usage?from=${from}&to=${to}&groupBy=model`)]);
  if (!daily.ok) return say($('usage-status'), daily.error.message, true);
  const labels = days(from, to);
  const per = new Map(daily.data.data.map((r) => [r.period, r]));
  drawChart($('usage-daily'), labels, [
    { label: 'tokens', values: labels.map((d) => per.get(d)?.tokens ?? 0) },
    { label: 'generations', line: true, values: labels.map((d) => per.get(d)?.count ?? 0) },
  ], { title: 'Tokens and generations per day' });
  const models = (byModel.data?.data ?? []).map((r) => [r.modelId ?? '(none)', r.count, r.tokens]);
  drawChart($('usage-breakdown'), models.map((r) => r[0]), [
    { label: 'tokens', values: models.map((r) => r[2]) },
    { label: 'generations', line: true, values: models.map((r) => r[1]) },
  ], { title: 'By model' });
  dailyRows = daily.data.data.map((r) => [r.period, r.count, r.tokens]);
  modelRows = models;
  $('usage-daily-table').replaceChildren(table('Per day', ['Day', 'Generations', 'Tokens'], dailyRows.map((r) => r.map(String)), { id: 'usage-days' }));
  $('usage-breakdown-table').replaceChildren(table('By model', ['Model', 'Generations', 'Tokens'], modelRows.map((r) => r.map(String)), { id: 'usage-groups' }));
  say($('usage-status'), `${number(daily.data.total.count)} generations, ${number(daily.data.total.tokens)} tokens from ${from} to ${to}.`);
}

$('usage-csv').addEventListener('click', () => {
  download(`my-usage-${$('usage-from').value}-${$('usage-to').value}.csv`, csv(['day', 'generations', 'tokens'], dailyRows) + '\r\n' + csv(['model', 'generations', 'tokens'], modelRows));
});

$('gens-more').addEventListener('click', () => refreshGenerations(false));

async function refreshGenerations(fresh) {
  if (fresh) cursor = null;
  const res = await api.get(`v1/generations?limit=20${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
  if (!res.ok) return $('gens-table').replaceChildren(el('p', { class: 'error' }, res.error.message));
  const rows = res.data.data.map((i) => [resultPreview(i, resultTypes.get(i.modelId)), i.modelId, el('span', { class: `status ${i.status}` }, i.status), number(i.price ?? 0), when(i.createdAt)]);
  const existing = fresh ? null : document.querySelector('#gens tbody');
  if (existing) for (const cells of rows) existing.append(el('tr', {}, cells.map((c) => el('td', {}, c))));
  else $('gens-table').replaceChildren(table('Newest first', ['Result', 'Model', 'Status', 'Tokens', 'Created (UTC)'], rows, { id: 'gens' }));
  cursor = res.data.nextCursor;
  $('gens-more').hidden = !cursor;
}
