import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * The shape of the house, checked as a newcomer would check it (issue 35): small files, small constructors, one
 * clock, imports pointing down the layers and never in a circle, few fixed sleeps in tests.
 */
const repo = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const coreSrc = join(repo, 'packages/core/src');

function filesUnder(dir: string, test: (path: string) => boolean): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name === 'dist' || name.startsWith('.')) continue;
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...filesUnder(p, test));
    else if (test(p)) out.push(p);
  }
  return out;
}

const coreFiles = filesUnder(coreSrc, (p) => p.endsWith('.ts'));
const text = new Map(coreFiles.map((f) => [f, readFileSync(f, 'utf8')]));
const rel = (f: string): string => relative(coreSrc, f);

/** Relative imports of a file (value and type imports alike, re-exports too), as absolute .ts paths. */
function importsOf(file: string): string[] {
  const out: string[] = [];
  for (const m of text.get(file)!.matchAll(/(?:^|\n)\s*(?:import|export)\b[^'"]*?from\s*['"](\.{1,2}\/[^'"]+)['"]/g)) {
    out.push(resolve(dirname(file), m[1]!).replace(/\.js$/, '.ts'));
  }
  return out;
}

describe('the house (issue 35)', () => {
  it('no file in packages/core/src is over 400 lines', () => {
    const long = coreFiles.map((f) => [rel(f), text.get(f)!.split('\n').length] as const).filter(([, n]) => n > 400);
    expect(long).toEqual([]);
  });

  it('no file in packages/testing/src is over 600 lines', () => {
    const files = filesUnder(join(repo, 'packages/testing/src'), (p) => p.endsWith('.ts'));
    const long = files.map((f) => [relative(repo, f), readFileSync(f, 'utf8').split('\n').length] as const).filter(([, n]) => n > 600);
    expect(long).toEqual([]);
  });

  it('no constructor in packages/core/src takes more than 6 parameters', () => {
    const wide: string[] = [];
    for (const f of coreFiles) {
      for (const m of text.get(f)!.matchAll(/\bconstructor\s*\(/g)) {
        // The parameter list: up to the matching parenthesis.
        let depth = 1;
        let i = m.index! + m[0].length;
        const start = i;
        for (; i < text.get(f)!.length && depth > 0; i++) {
          const ch = text.get(f)![i];
          if (ch === '(' || ch === '{' || ch === '[' || ch === '<') depth++;
          else if (ch === ')' || ch === '}' || ch === ']' || ch === '>') depth--;
        }
        const params = text.get(f)!.slice(start, i - 1);
        // Top-level commas only (decorators and defaults may hold their own).
        let count = params.trim() === '' ? 0 : 1;
        let d = 0;
        for (const ch of params) {
          if (ch === '(' || ch === '{' || ch === '[' || ch === '<') d++;
          else if (ch === ')' || ch === '}' || ch === ']' || ch === '>') d--;
          else if (ch === ',' && d === 0) count++;
        }
        if (/,\s*$/.test(params)) count--;
        if (count > 6) wide.push(`${rel(f)}: ${count}`);
      }
    }
    expect(wide).toEqual([]);
  });

  it('time is read from the clock: Date.now() appears at most twice in packages/core/src', () => {
    const reads = coreFiles.flatMap((f) => (text.get(f)!.match(/Date\.now\(\)/g) ?? []).map(() => rel(f)));
    expect(reads.length, reads.join(', ')).toBeLessThanOrEqual(2);
  });

  it('there is no import circle in packages/core/src (type imports included)', () => {
    const graph = new Map(coreFiles.map((f) => [f, importsOf(f).filter((t) => text.has(t))]));
    const state = new Map<string, 'open' | 'done'>();
    const circles: string[] = [];
    const stack: string[] = [];
    const visit = (f: string): void => {
      state.set(f, 'open');
      stack.push(f);
      for (const t of graph.get(f)!) {
        if (state.get(t) === 'open') circles.push([...stack.slice(stack.indexOf(t)), t].map(rel).join(' -> '));
        else if (!state.has(t)) visit(t);
      }
      stack.pop();
      state.set(f, 'done');
    };
    for (const f of coreFiles) if (!state.has(f)) visit(f);
    expect(circles).toEqual([]);
  });

  it('the layers below http import no HTTP or Node plumbing type', () => {
    const below = coreFiles.filter((f) => /^(domain|lifecycle|use-cases|runner|push|ports|memory|disk|settings)\//.test(rel(f)));
    const bad = below.flatMap((f) => importsOf(f).filter((t) => /\/core\/src\/(http|node|openapi)\//.test(t)).map((t) => `${rel(f)} -> ${rel(t)}`));
    expect(bad).toEqual([]);
  });

  it('tests hold at most 30 fixed sleeps, each with a comment saying why', () => {
    const tests = [
      ...filesUnder(join(repo, 'packages'), (p) => /\.test\.ts$|\/test\/.*\.ts$|\/testing\/src\/.*\.ts$/.test(p)),
      ...filesUnder(join(repo, 'examples'), (p) => /\/test\/.*\.ts$/.test(p)),
    ];
    const sleeps: string[] = [];
    for (const f of tests) {
      readFileSync(f, 'utf8')
        .split('\n')
        .forEach((line, i) => {
          if (/setTimeout\(\s*r(esolve)?\s*,\s*[0-9]+|sleep\(\s*[0-9]+|delay\(\s*[0-9]+/.test(line)) sleeps.push(`${relative(repo, f)}:${i + 1}`);
        });
    }
    expect(sleeps.length, sleeps.join('\n')).toBeLessThanOrEqual(30);
  });
});
