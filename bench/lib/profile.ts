/**
 * CPU profiles: taken in this process with the V8 profiler (node:inspector, the same profiler `--cpu-prof` uses),
 * or read from a .cpuprofile a server child wrote; summarised as the top frames by self time and our own
 * functions (files under packages/) by inclusive time.
 */
import { Session } from 'node:inspector/promises';
import { readFileSync, writeFileSync } from 'node:fs';
import type { ProfileFrame, ProfileSummary } from './types.js';

interface CpuProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number };
  hitCount?: number;
  children?: number[];
}
interface CpuProfile {
  nodes: CpuProfileNode[];
  startTime: number;
  endTime: number;
  samples?: number[];
  timeDeltas?: number[];
}

/** Shortens a frame's URL: repository-relative for our code, `pkg/file` for dependencies. */
function shortFile(url: string): string {
  if (!url) return '';
  const u = url.replace(/^file:\/\//, '');
  const nm = u.lastIndexOf('/node_modules/');
  if (nm !== -1) return u.slice(nm + '/node_modules/'.length);
  const i = u.indexOf('/packages/');
  if (i !== -1) return u.slice(i + 1);
  const b = u.indexOf('/bench/');
  if (b !== -1) return u.slice(b + 1);
  return u;
}

export function isOurs(url: string): boolean {
  // Sources (--source) or the built packages (dist/, what the bench measures by default; reached through the
  // workspace links, so the path may also run through node_modules/@genservice).
  return /\/packages\/[^/]+\/(?:src|dist)\//.test(url) && !/\/node_modules\/(?!@genservice\/)/.test(url.slice(url.indexOf('/packages/')));
}

export function summarize(profile: CpuProfile, label: string, top = 15): ProfileSummary {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  // Self time per node, from the samples and their time deltas (microseconds).
  const self = new Map<number, number>();
  const samples = profile.samples ?? [];
  const deltas = profile.timeDeltas ?? [];
  for (let i = 0; i < samples.length; i++) {
    // timeDeltas[i] is the time before sample i; attribute the interval after it to sample i.
    const dt = deltas[i + 1] ?? deltas[i] ?? 0;
    self.set(samples[i]!, (self.get(samples[i]!) ?? 0) + Math.max(0, dt));
  }
  const totalUs = [...self.values()].reduce((a, b) => a + b, 0) || 1;
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

  const key = (n: CpuProfileNode): string => `${n.callFrame.functionName || '(anonymous)'}|${n.callFrame.url}|${n.callFrame.lineNumber}`;
  const selfBy = new Map<string, number>();
  const totalBy = new Map<string, number>();
  const meta = new Map<string, CpuProfileNode>();
  for (const [id, us] of self) {
    const n = byId.get(id)!;
    const k = key(n);
    meta.set(k, n);
    selfBy.set(k, (selfBy.get(k) ?? 0) + us);
    // Inclusive: every distinct function on the stack gets the sample once (recursion counted once).
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const cn = byId.get(cur)!;
      const ck = key(cn);
      if (seen.has(ck)) continue;
      seen.add(ck);
      meta.set(ck, cn);
      totalBy.set(ck, (totalBy.get(ck) ?? 0) + us);
    }
  }
  const frame = (k: string): ProfileFrame => {
    const n = meta.get(k)!;
    const s = selfBy.get(k) ?? 0;
    const t = totalBy.get(k) ?? 0;
    return {
      fn: n.callFrame.functionName || '(anonymous)',
      file: shortFile(n.callFrame.url),
      line: n.callFrame.lineNumber + 1,
      selfMs: s / 1000,
      totalMs: t / 1000,
      selfPct: (100 * s) / totalUs,
      totalPct: (100 * t) / totalUs,
    };
  };
  const topSelf = [...selfBy.keys()].sort((a, b) => selfBy.get(b)! - selfBy.get(a)!).slice(0, top).map(frame);
  const ours = [...totalBy.keys()]
    .filter((k) => isOurs(meta.get(k)!.callFrame.url))
    .sort((a, b) => totalBy.get(b)! - totalBy.get(a)!)
    .slice(0, top)
    .map(frame);
  return { label, totalMs: totalUs / 1000, topSelf, ours };
}

export function summarizeFile(file: string, label: string): ProfileSummary {
  return summarize(JSON.parse(readFileSync(file, 'utf8')) as CpuProfile, label);
}

/** Profiles `work` in this process and writes the .cpuprofile to `file`. */
export async function profileHere(file: string, label: string, work: () => Promise<unknown>): Promise<ProfileSummary> {
  const session = new Session();
  session.connect();
  try {
    await session.post('Profiler.enable');
    await session.post('Profiler.setSamplingInterval', { interval: 100 });
    await session.post('Profiler.start');
    try {
      await work();
    } finally {
      const { profile } = await session.post('Profiler.stop');
      writeFileSync(file, JSON.stringify(profile));
    }
  } finally {
    session.disconnect();
  }
  return summarizeFile(file, label);
}

export function formatProfile(p: ProfileSummary): string {
  const row = (f: ProfileFrame): string =>
    `| ${f.fn} | ${f.file}${f.line > 1 ? `:${f.line}` : ""} | ${f.selfPct.toFixed(1)}% | ${f.totalPct.toFixed(1)}% |`;
  return [
    `Profile: ${p.label} (${p.totalMs.toFixed(0)} ms sampled)`,
    '',
    'Top frames by self time:',
    '',
    '| function | file | self | total |',
    '|---|---|---:|---:|',
    ...p.topSelf.map(row),
    '',
    'Our functions (packages/*/src, or dist/ of the built packages) by inclusive time:',
    '',
    '| function | file | self | total |',
    '|---|---|---:|---:|',
    ...p.ours.map(row),
  ].join('\n');
}
