/** One side of a comparison. `value` is what the ratio is taken of; the rest is shown. */
export interface Measure {
  /** Requests/s, operations/s or a latency in microseconds (see `unit`). */
  value: number;
  unit: 'req/s' | 'ops/s' | 'gen/s' | 'events/s' | 'us' | 'ms' | 'B';
  p50Ms?: number;
  p99Ms?: number;
  /** Extra text for the table cell. */
  extra?: string;
}

export interface Target {
  /** `min`: ratio must be >= bound; `max`: ratio must be <= bound. */
  kind: 'min' | 'max';
  bound: number;
}

export interface Row {
  /** Stable id, e.g. `http.express.get.p1`; also the key of a note in bench/notes/<id-prefix>.md. */
  id: string;
  section: 'http' | 'runner' | 'stores' | 'scale' | 'push' | 'telemetry';
  name: string;
  ours: Measure;
  oursLabel: string;
  base?: Measure;
  baseLabel?: string;
  /** ours / base (or a given ratio for the scale rows). */
  ratio?: number;
  target?: Target;
  met?: boolean;
  /** Why a row has no figure (e.g. a package not there yet). */
  skipped?: string;
}

export interface HttpCaseResult {
  rps: number;
  p50: number;
  p99: number;
  total: number;
  /** Until-completed cases: ms from the end of the load until the last generation completed. */
  drainMs?: number;
}

export interface ProfileFrame {
  fn: string;
  file: string;
  line: number;
  selfMs: number;
  totalMs: number;
  selfPct: number;
  totalPct: number;
}

export interface ProfileSummary {
  label: string;
  totalMs: number;
  /** Top frames by self time, all code. */
  topSelf: ProfileFrame[];
  /** Our own functions (packages/*) by inclusive time. */
  ours: ProfileFrame[];
}
