// The playground page: API key -> models -> a form from the model's settings -> price -> Generate -> live status ->
// the result, and the caller's history. Every answer of the API is shown next to what caused it. No innerHTML:
// everything the service sends is set as text.
import { Api, apiBase, httpUrl, idempotencyKey } from './api.js';
import { clientCall, curlCommand, tabs } from './code.js';
import { SettingsForm, detailsBySetting, h } from './form.js';
import { drawUsage } from './usage.js';
import { ModelError, showModel } from './viewer3d.js';

const KEY_STORAGE = 'genservice.playground.apiKey';
const MODEL_STORAGE = 'genservice.playground.modelId';
const HISTORY_PAGE = 10;
/** The metadata label the page gives a generation it starts: its prompt, which the history shows. */
const PROMPT_LABEL = 'prompt';
const RESULT_TYPES = { image: 'Image', video: 'Video', audio: 'Audio', text: 'Text', '3d': '3D' };

const $ = (id) => /** @type {any} */ (document.getElementById(id));
const ui = {
  keyForm: $('key-form'),
  key: $('api-key'),
  keyError: $('api-key-error'),
  model: $('model'),
  modelInfo: $('model-info'),
  modelError: $('model-error'),
  form: $('settings-form'),
  fields: $('settings-fields'),
  settingsEmpty: $('settings-empty'),
  price: $('price'),
  balance: $('balance'),
  generate: $('generate'),
  generateError: $('generate-error'),
  status: $('status'),
  progress: $('progress'),
  result: $('result'),
  resultHeading: $('result-heading'),
  history: $('history'),
  historyEmpty: $('history-empty'),
  historyError: $('history-error'),
  historyMore: $('history-more'),
  historyRefresh: $('history-refresh'),
  usage: $('usage'),
  usageError: $('usage-error'),
  usageRefresh: $('usage-refresh'),
  resultTabs: $('result-tabs'),
  code: $('code'),
  codeEmpty: $('code-empty'),
  codeCurl: $('code-curl'),
  codeTs: $('code-ts'),
  copyCurl: $('copy-curl'),
  copyTs: $('copy-ts'),
  codeCopied: $('code-copied'),
};

const api = new Api(apiBase(window.location), () => ui.key.value.trim());
/** @type {Map<string, any>} */
const models = new Map();
const form = new SettingsForm(
  ui.fields,
  () => {
    scheduleQuote();
    showCode();
  },
  (file) => api.upload(file),
);
const showTab = tabs(ui.resultTabs);
let watching = null; // AbortController of the generation being followed
let historyCursor = null;

function showError(el, message) {
  el.textContent = message;
  el.hidden = !message;
}

function tokens(n) {
  return typeof n === 'number' ? `${n} ${n === 1 ? 'token' : 'tokens'}` : '–';
}

function seconds(n) {
  return n < 1 ? 'under a second' : `about ${Math.round(n)} s`;
}

// ------------------------------------------------------------------------------------------------ errors of the API

/** Shows an API error beside what caused it: the key, the model, a setting, or the Generate button. */
function showApiError(answer, where) {
  const e = answer.error ?? { code: 'unknown', message: 'Something went wrong.' };
  if (answer.status === 401) {
    showError(ui.keyError, 'The service did not accept this API key. Check it and connect again.');
    ui.key.setAttribute('aria-invalid', 'true');
    ui.key.focus();
    return;
  }
  if (e.code === 'model_not_found') {
    showError(ui.modelError, e.message);
    ui.model.setAttribute('aria-invalid', 'true');
    ui.model.focus();
    return;
  }
  if (answer.status === 400 && Array.isArray(e.details) && e.details.length) {
    const unplaced = form.showErrors(detailsBySetting(e.details));
    if (unplaced.length || where !== 'generate') showError(ui.generateError, [e.message, ...unplaced].join(' '));
    else showError(ui.generateError, `${e.message} See the fields marked above.`);
    return;
  }
  let message = e.message;
  if (answer.status === 402) message = `Not enough tokens. ${e.message}`;
  if (answer.status === 429) {
    const after = Number(answer.headers.get('retry-after'));
    message = `${e.message}${Number.isFinite(after) && after > 0 ? ` Try again in ${after} s.` : ''}`;
  }
  showError(ui.generateError, message);
}

function clearErrors() {
  showError(ui.keyError, '');
  showError(ui.modelError, '');
  showError(ui.generateError, '');
  ui.key.removeAttribute('aria-invalid');
  ui.model.removeAttribute('aria-invalid');
  form.clearErrors();
}

// ------------------------------------------------------------------------------------------------ key and models

async function connect() {
  clearErrors();
  const key = ui.key.value.trim();
  if (!key) {
    showError(ui.keyError, 'Enter your API key.');
    ui.key.setAttribute('aria-invalid', 'true');
    ui.key.focus();
    return;
  }
  sessionStorage.setItem(KEY_STORAGE, key);
  const answer = await api.request('GET', 'v1/models');
  if (!answer.ok) {
    if (answer.status === 401) showApiError(answer, 'key');
    else showError(ui.keyError, answer.error.message);
    return;
  }
  models.clear();
  ui.model.replaceChildren();
  // Grouped by result type; each option is the model's title (the title attribute and the hint below give all of it).
  const groups = new Map();
  for (const m of answer.data.models) {
    models.set(m.modelId, m);
    const type = RESULT_TYPES[m.resultType] ?? String(m.resultType);
    if (!groups.has(type)) groups.set(type, h('optgroup', { label: type }));
    groups.get(type).append(h('option', { value: m.modelId, title: m.title, text: m.title }));
  }
  ui.model.append(...groups.values());
  labelModels();
  ui.model.disabled = models.size === 0;
  if (!models.size) ui.model.append(h('option', { value: '', text: 'This service has no models' }));
  const remembered = sessionStorage.getItem(MODEL_STORAGE);
  if (remembered && models.has(remembered)) ui.model.value = remembered;
  selectModel();
  ui.historyRefresh.disabled = false;
  ui.usageRefresh.disabled = false;
  void refreshBalance();
  void loadHistory(true);
  void loadUsage();
}

/**
 * Fits each option's text in the select as it is drawn now: the whole title when it fits; else the title without a
 * closing remark in brackets, when that still names one model only; else the title cut at a word, with an ellipsis.
 * The whole title is always in the option's title attribute and, for the chosen model, in the hint below.
 */
function labelModels() {
  const style = getComputedStyle(ui.model);
  const canvas = (labelModels.canvas ??= document.createElement('canvas'));
  const ctx = canvas.getContext('2d');
  if (!ctx || !ui.model.clientWidth) return;
  ctx.font = `${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
  // The select's text box: its width less padding and the arrow.
  const room = ui.model.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight) - 28;
  const fits = (text) => ctx.measureText(text).width <= room;
  const short = (title) => title.replace(/\s*\([^()]*\)\s*$/, '');
  const shorts = [...models.values()].map((m) => short(m.title));
  for (const option of ui.model.querySelectorAll('option[value]')) {
    const title = models.get(option.value)?.title;
    if (!title) continue;
    let text = title;
    if (!fits(text) && short(title) && shorts.filter((s) => s === short(title)).length === 1) text = short(title);
    if (!fits(text)) {
      const words = text.split(' ');
      while (words.length > 1 && !fits(`${words.join(' ')}…`)) words.pop();
      text = `${words.join(' ')}…`;
    }
    option.textContent = text;
  }
}

let shownModel = null; // the model whose form is shown: choosing it again keeps what was typed

function selectModel() {
  const model = models.get(ui.model.value);
  if (model && model === shownModel) return;
  shownModel = model ?? null;
  clearErrors();
  if (!model) {
    form.render([]);
    ui.generate.disabled = true;
    return;
  }
  sessionStorage.setItem(MODEL_STORAGE, model.modelId);
  ui.modelInfo.textContent = `${model.title}: ${RESULT_TYPES[model.resultType] ?? model.resultType} result, takes ${seconds(model.estimatedGenerationTime)}. Id: ${model.modelId}.`;
  ui.model.title = model.title;
  form.render(model.settings);
  ui.settingsEmpty.textContent = model.settings.length
    ? 'Fields marked * are required; empty optional fields use the model’s defaults.'
    : 'This model has no settings.';
  ui.generate.disabled = false;
  scheduleQuote(0);
  showCode();
}

// ------------------------------------------------------------------------------------------------ code

/** The API's base URL as the caller would type it: the mount point, no trailing slash. */
function apiRoot() {
  return api.url('').replace(/\/+$/, '');
}

/** The Code tab: this form's generation as a curl command and as a @genservice/client call, kept up to date. */
function showCode() {
  const model = models.get(ui.model.value);
  ui.code.hidden = !model;
  ui.codeEmpty.hidden = Boolean(model);
  if (!model) return;
  const body = { modelId: model.modelId, settings: form.read() };
  ui.codeCurl.textContent = curlCommand(apiRoot(), body);
  ui.codeTs.textContent = clientCall(apiRoot(), body);
  ui.code.dataset.model = model.modelId;
}

async function copy(pre, what) {
  try {
    await navigator.clipboard.writeText(pre.textContent);
    ui.codeCopied.textContent = `${what} copied.`;
  } catch {
    // No clipboard (an insecure origin, or permission refused): select the text for the caller to copy.
    getSelection()?.selectAllChildren(pre);
    pre.focus();
    ui.codeCopied.textContent = `${what} selected: copy it with your keyboard.`;
  }
}

// ------------------------------------------------------------------------------------------------ price and balance

let quoteTimer = 0;
let quoteSeq = 0;
function scheduleQuote(delay = 250) {
  clearTimeout(quoteTimer);
  quoteTimer = setTimeout(() => void quote(), delay);
}

/** `POST /v1/quotes`: the price a create would reserve now, and the balance; nothing is reserved. */
async function quote() {
  const model = models.get(ui.model.value);
  if (!model) return;
  const seq = ++quoteSeq;
  if (form.missingRequired().size) {
    ui.price.textContent = 'fill in the required settings to see it';
    return;
  }
  const answer = await api.request('POST', 'v1/quotes', { body: { modelId: model.modelId, settings: form.read() } });
  if (seq !== quoteSeq) return; // a newer quote is on its way
  if (answer.ok) {
    ui.price.textContent = tokens(answer.data.price);
    ui.balance.textContent = tokens(answer.data.balance);
  } else if (answer.status === 400) {
    ui.price.textContent = 'not yet: a setting is not valid';
  } else if (answer.status === 401) {
    showApiError(answer, 'quote');
  } else {
    ui.price.textContent = '–';
  }
}

async function refreshBalance() {
  const answer = await api.request('GET', 'v1/balance');
  if (answer.ok) ui.balance.textContent = tokens(answer.data.balance);
}

// ------------------------------------------------------------------------------------------------ generate

async function generate() {
  clearErrors();
  const model = models.get(ui.model.value);
  if (!model) return;
  const missing = form.missingRequired();
  if (missing.size) {
    form.showErrors(missing);
    showError(ui.generateError, 'Fill in the required settings marked above.');
    return;
  }
  ui.generate.disabled = true;
  ui.generate.textContent = 'Starting…';
  try {
    const settings = form.read();
    const prompt = promptOf(model, settings);
    const answer = await api.request('POST', 'v1/generations', {
      // The prompt as a label of the generation (metadata), so the history can show it.
      body: { modelId: model.modelId, settings, ...(prompt ? { metadata: { [PROMPT_LABEL]: prompt } } : {}) },
      headers: { 'idempotency-key': idempotencyKey() },
    });
    if (!answer.ok) {
      showApiError(answer, 'generate');
      return;
    }
    showTab('tab-result');
    void refreshBalance();
    void loadHistory(true);
    void watch(answer.data.generationId, model);
  } finally {
    ui.generate.disabled = false;
    ui.generate.textContent = 'Generate';
  }
}

/**
 * What the history shows of a generation the page starts: the `prompt` setting, else the first text setting; at most
 * 200 characters (whole code points: a cut never splits a character, which the API would refuse as a label).
 */
function promptOf(model, settings) {
  const name = model.settings.some((s) => s.name === 'prompt') ? 'prompt' : model.settings.find((s) => s.fieldType === 'text')?.name;
  const value = name === undefined ? undefined : settings[name];
  if (typeof value !== 'string' || !value.trim()) return undefined;
  const chars = Array.from(value.trim());
  return chars.length > 200 ? `${chars.slice(0, 199).join('')}…` : chars.join('');
}

// ------------------------------------------------------------------------------------------------ status and result

/** A wait in seconds as words: `40 s`, `3 min`. */
function formatWait(seconds) {
  return seconds < 90 ? `${Math.max(1, Math.round(seconds))} s` : `${Math.round(seconds / 60)} min`;
}

function setStatus(item, model) {
  const label = h('span', { class: `badge ${item.status}`, text: item.status });
  const parts = [h('span', { text: 'Status: ' }), label];
  const title = model?.title ?? item.modelId;
  if (title) parts.push(h('span', { class: 'muted', text: ` · ${title}` }));
  const q = item.queue;
  if (item.status === 'pending' && q && typeof q.position === 'number') {
    // Where it waits (details and the event stream carry it while pending); the estimate when the service has one.
    const eta = typeof q.etaSeconds === 'number' ? `, about ${formatWait(q.etaSeconds)}` : '';
    const ahead = q.aheadOfYou === 1 ? '1 ahead of you' : `${q.aheadOfYou} ahead of you`;
    parts.push(h('span', { class: 'queue-position', 'data-position': String(q.position), text: ` · #${q.position} in the queue (${ahead}${eta})` }));
  }
  const p = item.progress;
  if (p && typeof p.fraction === 'number' && item.status === 'processing') {
    parts.push(h('span', { text: ` · ${Math.round(p.fraction * 100)} %${p.message ? ` (${p.message})` : ''}` }));
    ui.progress.hidden = false;
    ui.progress.value = p.fraction;
  } else if (item.status === 'pending' || item.status === 'processing') {
    ui.progress.hidden = false;
    ui.progress.removeAttribute('value'); // indeterminate
  } else {
    ui.progress.hidden = true;
  }
  ui.status.replaceChildren(...parts);
  ui.status.dataset.state = item.status;
}

/** Follows a generation: the event stream, or polling with `Prefer: wait` when the stream is not available. */
async function watch(id, model, initial) {
  watching?.abort();
  const controller = new AbortController();
  watching = controller;
  ui.result.replaceChildren();
  ui.status.dataset.generation = id;
  setStatus(initial ?? { status: 'pending', modelId: model?.modelId }, model);
  let last = initial ?? null;
  const onItem = (item) => {
    if (controller.signal.aborted) return;
    last = item;
    setStatus(item, model);
  };
  // Partial output (text deltas, a preview) is no state: it is shown as it comes, until the result replaces it.
  const onEvent = (name, data) => {
    if (controller.signal.aborted) return;
    if (name === 'output') showPartial({ delta: data?.delta });
    else if (name === 'preview') showPartial({ preview: data });
    // A move up the queue: the same item, with its new place.
    else if (name === 'queue') {
      if (last?.status === 'pending') onItem({ ...last, queue: data });
    }
    else onItem(data);
  };
  const ended = await api.follow(id, onEvent, controller.signal);
  while (!controller.signal.aborted && !(ended && last && isFinal(last.status))) {
    if (last && isFinal(last.status)) break;
    const answer = await api
      .request('GET', `v1/generations/${encodeURIComponent(id)}?include=details`, { headers: { prefer: 'wait=25' }, signal: controller.signal })
      .catch(() => null);
    if (!answer || controller.signal.aborted) return;
    if (!answer.ok) {
      showApiError(answer, 'watch');
      ui.progress.hidden = true;
      return;
    }
    onItem(answer.data);
    // The details long-poll carries the partial output so far (and answers when more comes).
    if (answer.data?.output) showPartial({ text: answer.data.output.text, preview: answer.data.output.preview });
    if (!isFinal(answer.data.status)) await new Promise((r) => setTimeout(r, 500));
  }
  if (controller.signal.aborted || !last) return;
  await showResult(last, model, controller.signal);
  void refreshBalance();
  void loadHistory(true);
  void loadUsage();
}

/**
 * The partial output of a running generation: its text growing (`delta` appended, or `text` as a whole) and its
 * latest preview image. Lives in the result area until the result replaces it.
 */
function showPartial({ delta, text, preview }) {
  let box = ui.result.querySelector('[data-partial]');
  if (!box) {
    box = h('div', { 'data-partial': '' });
    ui.result.replaceChildren(box);
  }
  if (typeof delta === 'string' || typeof text === 'string') {
    let el = box.querySelector('.text-result');
    if (!el) {
      el = h('div', { class: 'text-result partial', tabindex: '0', role: 'region', 'aria-label': 'Text so far', 'aria-live': 'polite', 'aria-busy': 'true' });
      box.append(el);
    }
    if (typeof text === 'string') el.textContent = text;
    else el.textContent += delta;
  }
  const src = preview && typeof preview === 'object' ? httpUrl(preview.url) : null;
  if (src !== null) {
    let img = box.querySelector('img.preview');
    if (!img) {
      img = h('img', { class: 'media preview', alt: 'Preview (the result is on its way)' });
      box.prepend(h('figure', {}, [img, h('figcaption', { class: 'muted', text: 'Preview' })]));
    }
    if (img.getAttribute('src') !== src) img.setAttribute('src', src);
  }
}

function isFinal(status) {
  return status === 'completed' || status === 'failed';
}

function fileLink(url, text) {
  const href = httpUrl(url);
  if (href === null) return h('span', { text: String(url ?? '') });
  return h('a', { href, target: '_blank', rel: 'noopener noreferrer', text });
}

/** The finished generation: the result element of its type, or the reason it failed; with its price. */
async function showResult(item, model, signal) {
  setStatus(item, model);
  const out = [];
  const type = model?.resultType;
  const title = model?.title ?? item.modelId;
  if (item.status === 'failed') {
    const reason = item.error ?? (await failureOf(ui.status.dataset.generation)) ?? { code: 'failed', message: 'The generation failed.' };
    if (signal?.aborted) return;
    out.push(
      h('div', { class: 'failure', 'data-code': reason.code }, [
        h('p', {}, [h('strong', { text: 'Why it failed: ' }), h('span', { class: 'failure-message', text: reason.message })]),
        h('p', { class: 'muted' }, ['Code ', h('code', { class: 'failure-code', text: reason.code }), '.']),
      ]),
    );
  } else if (type === 'text' || httpUrl(item.result) === null) {
    // Not an http(s) URL (whatever the model's type claims): text, never a link or a media source.
    out.push(h('div', { class: 'text-result', tabindex: '0', role: 'region', 'aria-label': 'Generated text', text: item.result ?? '' }));
  } else if (type === 'image') {
    out.push(h('figure', {}, [h('img', { src: item.result, alt: `Generated image (${title})`, class: 'media' }), h('figcaption', {}, [fileLink(item.result, 'Open the image'), ...useAsInput(item.result, 'image')])]));
  } else if (type === 'video') {
    out.push(h('figure', {}, [h('video', { src: item.result, controls: true, preload: 'metadata', class: 'media', 'aria-label': `Generated video (${title})` }), h('figcaption', {}, [fileLink(item.result, 'Download the video'), ...useAsInput(item.result, 'video')])]));
  } else if (type === 'audio') {
    out.push(h('figure', {}, [h('audio', { src: item.result, controls: true, preload: 'metadata', 'aria-label': `Generated audio (${title})` }), h('figcaption', {}, [fileLink(item.result, 'Download the audio'), ...useAsInput(item.result, 'audio')])]));
  } else if (type === '3d') {
    const canvas = h('canvas', { class: 'viewer', tabindex: '0', role: 'img', 'aria-label': `3D model (${title}): drag or use the arrow keys to turn it, + and - to zoom`, 'aria-describedby': 'viewer-hint' });
    const hint = h('p', { id: 'viewer-hint', class: 'hint', text: 'Drag, or focus the view and use the arrow keys to turn it; the wheel or + and - zoom.' });
    const problem = h('p', { class: 'error', hidden: true });
    out.push(h('figure', {}, [canvas, h('figcaption', {}, [hint, fileLink(item.result, 'Download the model (GLB)')]), problem]));
    ui.result.replaceChildren(...out, priceLine(item));
    try {
      await showModel(canvas, item.result, signal);
    } catch (err) {
      if (signal?.aborted) return;
      showError(problem, err instanceof ModelError ? err.message : 'The model could not be shown. Download it instead.');
    }
    return;
  } else {
    out.push(h('p', {}, [fileLink(item.result, 'Open the result')]));
  }
  ui.result.replaceChildren(...out, priceLine(item));
}

/**
 * "Use as input": a button that puts a result's URL into a media setting of its type: the shown model's, else the
 * first model's that takes one (chosen for the caller). None when no model takes this type. The service takes the
 * link as an input of its owner's generations only.
 */
function useAsInput(url, fieldType) {
  const takes = (m) => m.settings.some((s) => s.fieldType === fieldType);
  if (![...models.values()].some(takes)) return [];
  const button = h('button', { type: 'button', class: 'small use-as-input', text: 'Use as input' });
  button.setAttribute('aria-label', `Use as input: this ${fieldType}`);
  button.addEventListener('click', () => {
    const current = models.get(ui.model.value);
    if (!current || !takes(current)) {
      ui.model.value = [...models.values()].find(takes).modelId;
      selectModel();
    }
    const name = form.mediaSetting(fieldType);
    if (name === undefined) return;
    form.addUrl(name, url);
    form.fields.get(name)?.focus();
  });
  return [' ', button];
}

/** The reason a generation failed, from its details (`GET v1/generations/{id}/details` → `error`). */
async function failureOf(id) {
  if (!id) return null;
  const answer = await api.request('GET', `v1/generations/${encodeURIComponent(id)}/details`);
  return answer.ok && answer.data?.error ? answer.data.error : null;
}

function priceLine(item) {
  return h('p', { class: 'price-line', text: `Price: ${tokens(item.price)}` });
}

// ------------------------------------------------------------------------------------------------ usage

/** `GET /v1/usage?groupBy=model`: the last 30 days' settled spend by model, drawn by usage.js. */
async function loadUsage() {
  const answer = await api.request('GET', 'v1/usage?groupBy=model');
  if (!answer.ok) {
    // A key without the read scope, or a service without usage: the chart stays empty and says why.
    showError(ui.usageError, answer.status === 401 ? 'Connect with a valid API key to see your usage.' : answer.error.message);
    return;
  }
  showError(ui.usageError, '');
  drawUsage(ui.usage, answer.data, (id) => models.get(id)?.title);
}

// ------------------------------------------------------------------------------------------------ history

async function loadHistory(reset) {
  if (reset) historyCursor = null;
  const query = new URLSearchParams({ limit: String(HISTORY_PAGE) });
  if (historyCursor) query.set('cursor', historyCursor);
  const answer = await api.request('GET', `v1/generations?${query}`);
  if (!answer.ok) {
    showError(ui.historyError, answer.status === 401 ? 'Connect with a valid API key to see your history.' : answer.error.message);
    return;
  }
  showError(ui.historyError, '');
  if (reset) ui.history.replaceChildren();
  for (const item of answer.data.data) ui.history.append(historyEntry(item));
  historyCursor = answer.data.nextCursor;
  ui.historyMore.hidden = !historyCursor;
  ui.historyEmpty.hidden = ui.history.children.length > 0;
}

/** When, briefly: the time for today's, the date for older ones (the full date and time is the element's title). */
function shortWhen(when, raw) {
  if (Number.isNaN(when.getTime())) return raw;
  const today = new Date().toDateString() === when.toDateString();
  return when.toLocaleString(undefined, today ? { timeStyle: 'short' } : { dateStyle: 'medium' });
}

/** A short piece of a text, whole words, for one line of a history card. */
function excerpt(text, max = 90) {
  const chars = Array.from(String(text).replace(/\s+/g, ' ').trim());
  if (chars.length <= max) return chars.join('');
  const cut = chars.slice(0, max).join('');
  return `${cut.slice(0, Math.max(cut.lastIndexOf(' '), max / 2))}…`;
}

/**
 * The thumbnail of a history card: the picture of an image result (the page's own small copy of the result URL), else
 * the result type in a box.
 */
function thumbnail(item, model) {
  const type = model?.resultType;
  const src = item.status === 'completed' && type === 'image' ? httpUrl(item.result) : null;
  if (src !== null) return h('span', { class: 'thumb' }, [h('img', { src, alt: '', loading: 'lazy', decoding: 'async', width: '48', height: '48' })]);
  return h('span', { class: 'thumb', 'aria-hidden': 'true', text: type ? (RESULT_TYPES[type] ?? type) : '?' });
}

/** One compact card: thumbnail, the prompt (or the model), a line of the text result or the failure, status and time. */
function historyEntry(item) {
  const model = models.get(item.modelId);
  const when = new Date(item.createdAt);
  const prompt = item.metadata?.[PROMPT_LABEL];
  const modelTitle = model?.title ?? item.modelId;
  let line = null;
  if (item.status === 'failed' && item.error) line = h('span', { class: 'entry-line failed', text: excerpt(item.error.message) });
  else if (item.status === 'completed' && (model?.resultType === 'text' || httpUrl(item.result) === null)) line = h('span', { class: 'entry-line', text: excerpt(item.result ?? '') });
  const button = h('button', { type: 'button', class: 'entry' }, [
    thumbnail(item, model),
    h('span', { class: 'entry-body' }, [
      h('span', { class: 'entry-title', text: prompt ?? modelTitle }),
      ...(line ? [line] : []),
      h('span', { class: 'entry-meta' }, [
        h('span', { class: `badge ${item.status}`, text: item.status }),
        ...(prompt ? [h('span', { class: 'entry-model', text: modelTitle })] : []),
        h('time', { datetime: item.createdAt, title: Number.isNaN(when.getTime()) ? undefined : when.toLocaleString(), text: shortWhen(when, item.createdAt) }),
      ]),
    ]),
  ]);
  button.addEventListener('click', () => void open(item.generationId));
  const title = `${model?.title ?? item.modelId}, ${Number.isNaN(when.getTime()) ? item.createdAt : when.toLocaleString()}`;
  const remove = h('button', { type: 'button', class: 'delete small', 'aria-label': `Delete ${title}`, text: 'Delete' });
  remove.addEventListener('click', () => void deleteEntry(item, title, remove));
  return h('li', { 'data-id': item.generationId }, [button, remove]);
}

/**
 * Deletes a generation of the history after the owner confirmed it (a running one is cancelled first, and charged
 * as a cancel). The entry goes only once the service said so.
 */
async function deleteEntry(item, title, button) {
  const running = !isFinal(item.status);
  const question = `Delete ${title}?${running ? ' It is still running: it will be cancelled and charged as a cancel.' : ''} Its result and files are deleted for good.`;
  if (!window.confirm(question)) return;
  button.disabled = true;
  const answer = await api.request('DELETE', `v1/generations/${encodeURIComponent(item.generationId)}`);
  // 404: it was already gone (deleted elsewhere, or expired): the entry goes all the same.
  if (!answer.ok && answer.status !== 404) {
    button.disabled = false;
    showError(ui.historyError, answer.error.message);
    return;
  }
  showError(ui.historyError, '');
  const li = button.closest('li');
  const next = li?.nextElementSibling ?? li?.previousElementSibling;
  li?.remove();
  if (ui.status.dataset.generation === item.generationId) {
    watching?.abort();
    ui.result.replaceChildren();
  }
  ui.historyEmpty.hidden = ui.history.children.length > 0;
  // Keyboard users stay in the list instead of falling back to the top of the page.
  next?.querySelector('button.entry')?.focus();
}

/** Opens a generation of the history: its result again, or its live status while it runs. */
async function open(id) {
  const answer = await api.request('GET', `v1/generations/${encodeURIComponent(id)}?include=details`);
  if (!answer.ok) {
    showError(ui.historyError, answer.error.message);
    return;
  }
  const item = answer.data;
  const model = models.get(item.modelId);
  showTab('tab-result');
  ui.resultHeading.setAttribute('tabindex', '-1');
  ui.resultHeading.focus();
  watching?.abort();
  if (isFinal(item.status)) {
    watching = new AbortController();
    ui.status.dataset.generation = id;
    ui.result.replaceChildren();
    await showResult(item, model, watching.signal);
  } else {
    void watch(id, model, item);
  }
}

// ------------------------------------------------------------------------------------------------ wiring

ui.keyForm.addEventListener('submit', (e) => {
  e.preventDefault();
  void connect();
});
ui.model.addEventListener('change', () => selectModel());
ui.form.addEventListener('submit', (e) => {
  e.preventDefault();
  void generate();
});
ui.historyMore.addEventListener('click', () => void loadHistory(false));
ui.historyRefresh.addEventListener('click', () => void loadHistory(true));
ui.usageRefresh.addEventListener('click', () => void loadUsage());
ui.copyCurl.addEventListener('click', () => void copy(ui.codeCurl, 'The curl command'));
ui.copyTs.addEventListener('click', () => void copy(ui.codeTs, 'The TypeScript'));
let relabel = 0;
window.addEventListener('resize', () => {
  cancelAnimationFrame(relabel);
  relabel = requestAnimationFrame(() => labelModels());
});

const saved = sessionStorage.getItem(KEY_STORAGE);
if (saved) {
  ui.key.value = saved;
  void connect();
}
