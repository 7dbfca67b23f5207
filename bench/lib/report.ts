/** The table (console and Markdown) and the SVG bar chart of the ratios. */
import type { Measure, Row, Target } from './types.js';

const nf0 = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });

export function fmtMeasure(m: Measure): string {
  let s: string;
  if (m.unit === 'us') s = `${m.value < 10 ? m.value.toFixed(2) : m.value.toFixed(1)} µs`;
  else if (m.unit === 'B') s = `${nf0.format(m.value)} B`;
  else if (m.unit === 'ms') s = `${m.value.toFixed(1)} ms`;
  else s = `${nf0.format(m.value)} ${m.unit}`;
  if (m.p50Ms !== undefined && m.p99Ms !== undefined) s += ` (p50 ${m.p50Ms.toFixed(2)} / p99 ${m.p99Ms.toFixed(2)} ms)`;
  if (m.extra) s += ` ${m.extra}`;
  return s;
}

export function fmtTarget(t?: Target): string {
  if (!t) return '';
  return `${t.kind === 'min' ? '>=' : '<='} ${t.bound.toFixed(2)}`;
}

export function verdict(r: Row): string {
  if (r.skipped) return 'skipped';
  if (!r.target) return '';
  return r.met ? 'met' : 'MISSED';
}

export function evaluate(r: Row): Row {
  if (r.ratio !== undefined && r.target) {
    r.met = r.target.kind === 'min' ? r.ratio >= r.target.bound : r.ratio <= r.target.bound;
  }
  return r;
}

function cells(r: Row): string[] {
  return [
    r.name,
    r.skipped ? `skipped: ${r.skipped}` : `${r.oursLabel}: ${fmtMeasure(r.ours)}`,
    r.base && r.baseLabel ? `${r.baseLabel}: ${fmtMeasure(r.base)}` : '',
    r.ratio !== undefined ? r.ratio.toFixed(3) : '',
    fmtTarget(r.target),
    verdict(r),
  ];
}

const HEAD = ['case', 'ours', 'baseline', 'ratio', 'target', 'result'];

export function consoleTable(rows: Row[]): string {
  const data = [HEAD, ...rows.map(cells)];
  const widths = HEAD.map((_, i) => Math.max(...data.map((r) => r[i]!.length)));
  const line = (r: string[]): string => r.map((c, i) => c.padEnd(widths[i]!)).join(' | ');
  return [line(HEAD), widths.map((w) => '-'.repeat(w)).join('-|-'), ...rows.map((r) => line(cells(r)))].join('\n');
}

export function markdownTable(rows: Row[]): string {
  const esc = (s: string): string => s.replace(/\|/g, '\\|');
  return [
    `| ${HEAD.join(' | ')} |`,
    '|---|---|---|---:|---|---|',
    ...rows.map((r) => `| ${cells(r).map((c, i) => (i === 5 && c === 'MISSED' ? '**MISSED**' : esc(c))).join(' | ')} |`),
  ].join('\n');
}

function xmlEscape(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/** Horizontal bars, one per row with a ratio; a tick at each target; green met, red missed, grey no target. */
export function svgChart(rows: Row[], title: string): string {
  const rs = rows.filter((r) => r.ratio !== undefined && !r.skipped);
  const labelW = 330;
  const plotW = 520;
  const barH = 14;
  const gap = 6;
  const top = 46;
  const height = top + rs.length * (barH + gap) + 40;
  const width = labelW + plotW + 90;
  const maxRatio = Math.min(3, Math.max(1.5, ...rs.map((r) => r.ratio!), ...rs.map((r) => r.target?.bound ?? 0)));
  const x = (v: number): number => Math.round((labelW + (Math.min(v, maxRatio) / maxRatio) * plotW) * 10) / 10;
  const parts: string[] = [];
  parts.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="11">`,
    `<rect width="100%" height="100%" fill="#fff"/>`,
    `<text x="10" y="20" font-size="14" font-weight="bold">${xmlEscape(title)}</text>`,
    `<text x="10" y="36" fill="#555">ratio = ours / baseline (scale rows: latency at 1M / at 1k, lower is better). Tick = target. Green met, red missed, grey no target.</text>`,
  );
  for (let v = 0; v <= maxRatio + 1e-9; v += 0.25) {
    const gx = x(v);
    const major = Math.abs(v - Math.round(v)) < 1e-9 || Math.abs(v * 2 - Math.round(v * 2)) < 1e-9;
    parts.push(`<line x1="${gx}" y1="${top - 4}" x2="${gx}" y2="${height - 30}" stroke="${v === 1 ? '#888' : '#e4e4e4'}" stroke-width="1"/>`);
    if (major) parts.push(`<text x="${gx}" y="${height - 16}" text-anchor="middle" fill="#555">${v.toFixed(v % 1 === 0 ? 0 : 1)}</text>`);
  }
  rs.forEach((r, i) => {
    const y = top + i * (barH + gap);
    const color = !r.target ? '#9e9e9e' : r.met ? '#2e7d32' : '#c62828';
    parts.push(`<text x="${labelW - 8}" y="${y + barH - 3}" text-anchor="end">${xmlEscape(r.name)}</text>`);
    parts.push(`<rect x="${labelW}" y="${y}" width="${Math.max(1, Math.round((x(r.ratio!) - labelW) * 10) / 10)}" height="${barH}" fill="${color}"/>`);
    const over = r.ratio! > maxRatio ? ' >' : '';
    parts.push(`<text x="${x(r.ratio!) + 4}" y="${y + barH - 3}" fill="#222">${r.ratio!.toFixed(2)}${over}</text>`);
    if (r.target) {
      const tx = x(r.target.bound);
      parts.push(`<line x1="${tx}" y1="${y - 2}" x2="${tx}" y2="${y + barH + 2}" stroke="#000" stroke-width="2"/>`);
    }
  });
  parts.push('</svg>');
  return parts.join('\n') + '\n';
}
