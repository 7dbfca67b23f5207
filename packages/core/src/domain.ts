/** The five kinds of result a model produces. */
export const RESULT_TYPES = ['image', 'video', 'text', 'audio', '3d'] as const;
export type ResultType = (typeof RESULT_TYPES)[number];

/** Lifecycle of a generation. Only forward: pending -> processing -> completed | failed, and pending -> failed. */
export const GENERATION_STATUSES = ['pending', 'processing', 'completed', 'failed'] as const;
export type GenerationStatus = (typeof GENERATION_STATUSES)[number];
export type TerminalStatus = 'completed' | 'failed';

export function isTerminal(status: GenerationStatus): status is TerminalStatus {
  return status === 'completed' || status === 'failed';
}

/** One parameter of a model, as listed by GET /v1/models. */
export interface SettingDescriptor {
  /** Key inside the `settings` object of a create request. */
  name: string;
  /** Human-readable label. */
  title: string;
  /** `text`, `select`, a media type (`image`, `video`, `audio`, `file`) or a host-registered type. */
  fieldType: string;
  /** Present and true when the setting must be supplied. */
  required?: boolean;
  /** Allowed values; only for `select`. */
  options?: string[];
}

/** A model as the contract shows it (element of `models` in GET /v1/models). */
export interface ModelInfo {
  modelId: string;
  title: string;
  resultType: ResultType;
  /** Approximate generation time in seconds. */
  estimatedGenerationTime: number;
  settings: SettingDescriptor[];
}

/** Settings after validation: keyed by setting name. Media settings are arrays of URLs. */
export type Settings = Record<string, unknown>;

/**
 * A generation as stored. `resultText` holds a text model's output; `resultKey` the BlobStore key of a file
 * result (its URL is signed at read time, so it is never stored).
 */
export interface GenerationRecord {
  id: string;
  ownerId: string;
  modelId: string;
  settings: Settings;
  status: GenerationStatus;
  /** Tokens reserved at create. */
  reserved: number;
  /** Tokens settled (what the client sees as `price`); set with a terminal status. */
  price?: number;
  resultText?: string;
  resultKey?: string;
  /** Why a generation failed; for logs and operators, never shown to the client. */
  failureReason?: string;
  /** How many times a worker claimed it (1 on the first run). */
  attempts: number;
  /** The worker that holds the current claim, and until when (epoch ms). */
  leaseOwner?: string;
  leaseExpiresAt?: number;
  createdAt: number;
  updatedAt: number;
  finishedAt?: number;
}

/** What a client reads from GET /v1/generations/:id. */
export interface GenerationView {
  status: GenerationStatus;
  result?: string;
  price?: number;
}
