import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { METRIC_NAMES } from '@genservice/core';
import { describe, expect, it } from 'vitest';

const docs = fileURLToPath(new URL('../../../docs/', import.meta.url));
const KNOWN = new Set<string>(METRIC_NAMES);

/** The metric names a PromQL expression uses (a histogram's series name its histogram). */
function metricsOf(expr: string): string[] {
  return [...expr.matchAll(/\bgenservice_[a-z_]+/g)].map((m) => m[0].replace(/_(bucket|sum|count)$/, ''));
}

describe('docs/observability.md and docs/grafana-dashboard.json', () => {
  it('the dashboard parses, and every query uses only metrics that exist', () => {
    const dashboard = JSON.parse(readFileSync(`${docs}grafana-dashboard.json`, 'utf8')) as { panels: Array<{ title: string; targets: Array<{ expr: string }> }> };
    expect(dashboard.panels.length).toBeGreaterThan(0);
    const used = new Set<string>();
    for (const panel of dashboard.panels) {
      expect(panel.targets.length, panel.title).toBeGreaterThan(0);
      for (const t of panel.targets) {
        const names = metricsOf(t.expr);
        expect(names.length, t.expr).toBeGreaterThan(0);
        for (const n of names) {
          expect(KNOWN, `${panel.title}: ${n}`).toContain(n);
          used.add(n);
        }
      }
    }
    // Every metric has a panel.
    expect([...used].sort()).toEqual([...KNOWN].sort());
  });

  it('the doc lists every metric, and its PromQL uses only metrics that exist', () => {
    const text = readFileSync(`${docs}observability.md`, 'utf8');
    for (const name of METRIC_NAMES) expect(text, name).toContain(`| \`${name}\` |`);
    const promql = [...text.matchAll(/```promql\n([\s\S]*?)```/g)].map((m) => m[1]!).join('\n');
    expect(promql.length).toBeGreaterThan(0);
    for (const n of metricsOf(promql)) expect(KNOWN, n).toContain(n);
    for (const n of metricsOf(text)) expect(KNOWN, n).toContain(n);
  });
});
