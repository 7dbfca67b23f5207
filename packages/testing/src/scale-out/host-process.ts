import { spawn, type ChildProcess } from 'node:child_process';

/** How to start one host process of a scale-out test (a package's `test/fixtures/host.ts`, run through tsx). */
export interface HostSpawn {
  /** The host script, relative to `cwd`. */
  script: string;
  /** The package folder the script runs in. */
  cwd: string;
  /** tsx's tsconfig (the root one: it includes every package's source, so core's decorators compile). */
  tsconfig: string;
  /** Variables of this process's environment the host must not see (a Redis URL for a host that must not need it). */
  withhold?: string[];
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * One host process: a genservice instance behind node:http, started from a package's host fixture. It prints JSON log
 * lines; `{"event":"listening","port":N}` says where it listens.
 */
export class HostProcess<E extends { INSTANCE_ID: string } = { INSTANCE_ID: string } & Record<string, string>> {
  readonly child: ChildProcess;
  port = 0;
  output = '';
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  exitInfo: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  private readonly listening: Promise<number>;

  constructor(
    readonly how: HostSpawn,
    readonly env: E,
  ) {
    const inherited: NodeJS.ProcessEnv = { ...process.env };
    for (const name of how.withhold ?? []) delete inherited[name];
    this.child = spawn(process.execPath, ['--conditions=@genservice/source', '--import', 'tsx', how.script], {
      cwd: how.cwd,
      env: { ...inherited, TSX_TSCONFIG_PATH: how.tsconfig, ...(env as Record<string, string | undefined>) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.exited = new Promise((resolve) => {
      this.child.on('exit', (code, signal) => {
        this.exitInfo = { code, signal };
        resolve({ code, signal });
      });
    });
    this.listening = new Promise<number>((resolve, reject) => {
      const onData = (d: Buffer): void => {
        this.output += d.toString();
        const m = /"event":"listening","port":(\d+)/.exec(this.output);
        if (m && this.port === 0) {
          this.port = Number(m[1]);
          resolve(this.port);
        }
      };
      this.child.stdout!.on('data', onData);
      this.child.stderr!.on('data', (d: Buffer) => (this.output += d.toString()));
      void this.exited.then(({ code, signal }) => reject(new Error(`host ${env.INSTANCE_ID} exited (${code ?? signal}) before listening:\n${this.output}`)));
    });
    this.listening.catch(() => undefined);
  }

  get alive(): boolean {
    return this.exitInfo === undefined;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  ready(timeoutMs = 30_000): Promise<number> {
    return Promise.race([
      this.listening,
      sleep(timeoutMs).then(() => {
        throw new Error(`host ${this.env.INSTANCE_ID} did not listen within ${timeoutMs} ms:\n${this.output}`);
      }),
    ]);
  }

  kill(signal: NodeJS.Signals = 'SIGKILL'): void {
    if (this.alive) this.child.kill(signal);
  }

  /** SIGTERM, then SIGKILL if it has not exited within `timeoutMs`. */
  async terminate(timeoutMs = 15_000): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    if (!this.alive) return this.exitInfo!;
    this.child.kill('SIGTERM');
    const done = await Promise.race([this.exited, sleep(timeoutMs).then(() => undefined)]);
    if (done) return done;
    this.child.kill('SIGKILL');
    return this.exited;
  }

  /** JSON log lines the host printed. */
  logs(): Array<Record<string, unknown>> {
    const out: Array<Record<string, unknown>> = [];
    for (const line of this.output.split('\n')) {
      if (!line.startsWith('{')) continue;
      try {
        out.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        // A line cut off by SIGKILL.
      }
    }
    return out;
  }
}

export interface CreateAnswer {
  status: number;
  generationId?: string;
  code?: string;
}

/** POST /v1/generations (model `fake`) against a host; network failures (a killed host) come back as status 0. */
export async function createOn(baseUrl: string, apiKey: string, prompt: string, timeoutMs = 10_000): Promise<CreateAnswer> {
  try {
    const res = await fetch(`${baseUrl}/v1/generations`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ modelId: 'fake', settings: { prompt } }),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const body = (await res.json()) as { generationId?: string; error?: { code?: string } };
    return { status: res.status, generationId: body.generationId, code: body.error?.code };
  } catch {
    return { status: 0 };
  }
}
