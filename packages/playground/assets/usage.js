// The caller's spend of the last 30 days by model, drawn as an SVG bar chart by this page (no library, no CDN).
// Everything the service sends is set as text or as an attribute value, never parsed as markup.
//
// Readable at any width: the chart is drawn at the width its figure has (one unit of the drawing is one CSS pixel,
// so the text keeps the page's size), each model's full name stands on its own line(s) above its bar, wrapped at
// word boundaries and never cut, and the figures sit beside the bar inside the drawing. A new width redraws it.

const SVG = 'http://www.w3.org/2000/svg';
const BAR = 18;
const LINE = 18;
const GAP = 6;
const ROW_GAP = 12;
const MIN_WIDTH = 200;

function el(name, attrs = {}, text) {
  const node = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

/**
 * Splits `text` into lines no wider than `width` as `measure` reports them, at spaces; a single word wider than a line
 * is broken inside (so nothing is ever cut off).
 * @param {string} text
 * @param {number} width
 * @param {(s: string) => number} measure
 * @returns {string[]}
 */
export function wrap(text, width, measure) {
  const lines = [];
  let line = '';
  for (const word of text.split(/\s+/).filter(Boolean)) {
    const candidate = line ? `${line} ${word}` : word;
    if (measure(candidate) <= width) {
      line = candidate;
      continue;
    }
    if (line) lines.push(line);
    line = '';
    let rest = word;
    while (measure(rest) > width && rest.length > 1) {
      let cut = rest.length - 1;
      while (cut > 1 && measure(rest.slice(0, cut)) > width) cut--;
      lines.push(rest.slice(0, cut));
      rest = rest.slice(cut);
    }
    line = rest;
  }
  if (line) lines.push(line);
  return lines.length ? lines : [''];
}

/** @type {WeakMap<HTMLElement, { report: any, title: (id: string) => string | undefined, width: number }>} */
const drawn = new WeakMap();
const resized = typeof ResizeObserver === 'function'
  ? new ResizeObserver((entries) => {
      for (const entry of entries) {
        const figure = /** @type {HTMLElement} */ (entry.target);
        const last = drawn.get(figure);
        if (last && Math.abs(figure.clientWidth - last.width) >= 1) drawUsage(figure, last.report, last.title);
      }
    })
  : null;

/**
 * Draws `report.data` (`[{ modelId, count, tokens }]`, most spent first) into `figure`: one bar per model scaled to
 * the largest, its full name above it and its tokens and generations beside it, and a caption with the total.
 * `title(modelId)` names a model.
 */
export function drawUsage(figure, report, title) {
  const rows = report.data.filter((r) => r.tokens > 0 || r.count > 0);
  const caption = figure.querySelector('figcaption');
  const old = figure.querySelector('svg');
  if (old) old.remove();
  const total = report.total;
  caption.textContent =
    rows.length === 0
      ? 'Nothing spent in the last 30 days.'
      : `Last 30 days: ${total.tokens} ${total.tokens === 1 ? 'token' : 'tokens'} over ${total.count} ${total.count === 1 ? 'generation' : 'generations'}.`;
  figure.dataset.models = String(rows.length);
  const width = Math.max(MIN_WIDTH, Math.floor(figure.clientWidth));
  drawn.set(figure, { report, title, width: figure.clientWidth });
  resized?.observe(figure);
  if (rows.length === 0) return;

  const svg = el('svg', { width, role: 'img', 'aria-label': caption.textContent, class: 'usage-chart' });
  figure.insertBefore(svg, caption);
  // Text is measured as the page draws it (its font, its size), in a probe removed afterwards.
  const probe = el('text', { class: 'usage-label', x: 0, y: -100 });
  svg.append(probe);
  const measure = (s) => {
    probe.textContent = s;
    return probe.getComputedTextLength();
  };
  const values = rows.map((r) => `${r.tokens} ${r.tokens === 1 ? 'token' : 'tokens'}, ${r.count} ${r.count === 1 ? 'run' : 'runs'}`);
  probe.setAttribute('class', 'usage-value');
  const valueRoom = Math.max(...values.map((v) => measure(v))) + 8;
  probe.setAttribute('class', 'usage-label');
  const max = Math.max(...rows.map((r) => r.tokens), 1);
  const barRoom = Math.max(40, width - valueRoom);

  let y = 0;
  rows.forEach((r, i) => {
    const name = r.modelId === null ? 'other' : (title(r.modelId) ?? r.modelId);
    const g = el('g', { 'data-model': r.modelId ?? '', 'data-tokens': r.tokens, class: 'usage-bar' });
    g.append(el('title', {}, `${name}: ${r.tokens} tokens, ${r.count} generations`));
    for (const line of wrap(name, width, measure)) {
      y += LINE;
      g.append(el('text', { x: 0, y: y - 4, class: 'usage-label' }, line));
    }
    y += GAP / 2;
    const barWidth = Math.max(2, (barRoom * r.tokens) / max);
    g.append(el('rect', { x: 0, y, width: barWidth, height: BAR, rx: 3, class: 'usage-rect' }));
    g.append(el('text', { x: barWidth + 6, y: y + BAR - 4, class: 'usage-value' }, values[i]));
    y += BAR + ROW_GAP;
    svg.append(g);
  });
  probe.remove();
  const height = Math.ceil(y - ROW_GAP + 2);
  svg.setAttribute('height', String(height));
  svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
}
