// The caller's spend of the last 30 days by model, drawn as an SVG bar chart by this page (no library, no CDN).
// Everything the service sends is set as text or as an attribute value, never parsed as markup.

const SVG = 'http://www.w3.org/2000/svg';
const BAR = 22;
const GAP = 8;
const LABEL = 170;
const WIDTH = 560;

function el(name, attrs = {}, text) {
  const node = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

function shorten(s, max) {
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}

/**
 * Draws `rows` (`[{ modelId, count, tokens }]`, most spent first) into `figure`: one bar per model scaled to the
 * largest, with its tokens and generations, and a caption with the total. `title(modelId)` names a model.
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
  if (rows.length === 0) return;
  const max = Math.max(...rows.map((r) => r.tokens), 1);
  const height = rows.length * (BAR + GAP) + GAP;
  const svg = el('svg', { viewBox: `0 0 ${WIDTH} ${height}`, width: '100%', role: 'img', 'aria-label': caption.textContent, class: 'usage-chart' });
  rows.forEach((r, i) => {
    const y = GAP + i * (BAR + GAP);
    const name = r.modelId === null ? 'other' : (title(r.modelId) ?? r.modelId);
    const width = Math.max(2, ((WIDTH - LABEL - 110) * r.tokens) / max);
    const g = el('g', { 'data-model': r.modelId ?? '', 'data-tokens': r.tokens, class: 'usage-bar' });
    g.append(el('title', {}, `${name}: ${r.tokens} tokens, ${r.count} generations`));
    g.append(el('text', { x: 0, y: y + BAR * 0.7, class: 'usage-label' }, shorten(name, 24)));
    g.append(el('rect', { x: LABEL, y, width, height: BAR, rx: 3, class: 'usage-rect' }));
    g.append(el('text', { x: LABEL + width + 6, y: y + BAR * 0.7, class: 'usage-value' }, `${r.tokens} (${r.count})`));
    svg.append(g);
  });
  figure.insertBefore(svg, caption);
}
