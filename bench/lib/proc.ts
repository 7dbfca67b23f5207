/**
 * Child processes of the bench: TypeScript run from source (`--conditions=@genservice/source --import tsx`),
 * optionally pinned to a core with taskset, talking over IPC. Every child is tracked and killed when this process
 * ends, on failure too; every child also exits by itself when its parent goes away (IPC disconnect).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

export const BENCH_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

const children = new Set<ChildProcess>();
let hooked = false;

function killAll(): void {
  for (const c of children) {
    if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  }
  children.clear();
}

function hook(): void {
  if (hooked) return;
  hooked = true;
  process.on('exit', killAll);
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.on(sig, () => {
      killAll();
      process.exit(130);
    });
  }
}

let tasksetOk: boolean | undefined;
/** Whether `taskset -c N` works here (it may be missing, or the cores may be restricted). */
export function canPin(): boolean {
  if (tasksetOk === undefined) {
    const r = spawnSync('taskset', ['-c', '1', 'true']);
    tasksetOk = r.status === 0;
  }
  return tasksetOk;
}

export interface SpawnTsOptions {
  /** Core to pin to, when taskset is available. */
  core?: number;
  nodeArgs?: string[];
  args?: string[];
  /** Inherit stdout/stderr (default) or pipe them. */
  quiet?: boolean;
}

/**
 * The genservice packages as users get them (built by tsup, what `pnpm bench` does first), unless
 * GENSERVICE_BENCH_SOURCE=1 asks for the TypeScript sources (tsx adds a `__name` wrapper to every closure there).
 */
const SOURCE_CONDITION = process.env.GENSERVICE_BENCH_SOURCE === '1' ? ['--conditions=@genservice/source'] : [];

/** Starts `node [nodeArgs] --import tsx <script> [args]` with an IPC channel. */
export function spawnTs(script: string, options: SpawnTsOptions = {}): ChildProcess {
  hook();
  const nodeArgs = [...(options.nodeArgs ?? []), ...SOURCE_CONDITION, '--import', 'tsx', script, ...(options.args ?? [])];
  const pinned = options.core !== undefined && canPin();
  const cmd = pinned ? 'taskset' : process.execPath;
  const argv = pinned ? ['-c', String(options.core), process.execPath, ...nodeArgs] : nodeArgs;
  const child = spawn(cmd, argv, {
    cwd: BENCH_DIR,
    stdio: ['ignore', options.quiet ? 'pipe' : 'inherit', options.quiet ? 'pipe' : 'inherit', 'ipc'],
    env: { ...process.env, NODE_ENV: 'production' },
  });
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

/** The next IPC message matching `pred`, or a rejection when the child exits first or `timeoutMs` passes. */
export function nextMessage<T>(child: ChildProcess, pred: (m: any) => boolean, timeoutMs: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => done(new Error(`no message from child ${child.pid} within ${timeoutMs} ms`)), timeoutMs);
    const onMessage = (m: unknown): void => {
      if (m && typeof m === 'object' && (m as { type?: unknown }).type === 'error') {
        done(new Error(`child ${child.pid} failed: ${String((m as { message?: unknown }).message)}`));
      } else if (pred(m)) done(undefined, m as T);
    };
    const onExit = (code: number | null, sig: string | null): void =>
      done(new Error(`child ${child.pid} exited (code ${code}, signal ${sig}) before answering`));
    function done(err?: Error, value?: T): void {
      clearTimeout(timer);
      child.off('message', onMessage);
      child.off('exit', onExit);
      if (err) reject(err);
      else resolve(value as T);
    }
    child.on('message', onMessage);
    child.once('exit', onExit);
  });
}

/** Asks a child to exit (IPC), then kills it if it has not within `graceMs`. */
export async function stopChild(child: ChildProcess, graceMs = 5000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    child.send({ type: 'exit' });
  } catch {
    // channel already closed
  }
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

/** For a child: exit when the parent goes away, and exit cleanly when asked. */
export function childLifecycle(onExit?: () => Promise<void> | void): void {
  const leave = (): void => {
    Promise.resolve(onExit?.())
      .catch(() => undefined)
      .finally(() => process.exit(0));
  };
  process.on('disconnect', leave);
  process.on('message', (m: unknown) => {
    if (m && typeof m === 'object' && (m as { type?: unknown }).type === 'exit') leave();
  });
}

export function send(message: unknown): void {
  process.send?.(message);
}

/** utime + stime of a process (Linux: /proc/<pid>/stat), in µs; CLK_TCK is 100, so in steps of 10 ms. */
export function processCpuUs(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(f[11]) + Number(f[12])) * 10_000;
}
