/** What a model produces. Text results are the text itself; every other type is a URL of the file. */
export type ResultType = 'image' | 'video' | 'text' | 'audio' | '3d';

export type GenerationStatus = 'pending' | 'processing' | 'completed' | 'failed';

/** A status that never changes again. */
export type TerminalStatus = 'completed' | 'failed';

/** One parameter of a model. */
export interface SettingDescriptor {
  /** Key inside `settings` of a create request. */
  name: string;
  /** Human-readable label. */
  title: string;
  /** `text`, `select`, a media type (`image`, `video`, `audio`, `file`: arrays of URLs) or a host-defined type. */
  fieldType: string;
  /** Present and true when the setting must be supplied. */
  required?: boolean;
  /** Allowed values; only for `select`. */
  options?: string[];
}

/** An element of GET /v1/models. */
export interface Model {
  modelId: string;
  title: string;
  resultType: ResultType;
  /** Approximate generation time in seconds; the client's polling starts from it. */
  estimatedGenerationTime: number;
  settings: SettingDescriptor[];
}

export interface CreateGenerationInput {
  modelId: string;
  /** Keyed by the `name` of the model's settings; media settings take arrays of URLs. */
  settings?: Record<string, unknown>;
}

/** Still running: no result and no price yet. */
export interface InProgressGeneration {
  generationId: string;
  status: 'pending' | 'processing';
}

export interface CompletedGeneration {
  generationId: string;
  status: 'completed';
  /** The text for text models; an absolute (usually signed, expiring) URL of the file for the others. */
  result: string;
  /** Tokens charged. */
  price: number;
}

export interface FailedGeneration {
  generationId: string;
  status: 'failed';
  /** Tokens charged for the failure (often 0). */
  price: number;
}

export type TerminalGeneration = CompletedGeneration | FailedGeneration;

/** Narrow on `status`: `result` exists only on completed, `price` only on completed and failed. */
export type Generation = InProgressGeneration | TerminalGeneration;

/** What POST /v1/generations/:id/cancel answers: the generation as it now is. */
export type CancelResult = Generation & {
  /** True when this call stopped it; false when it had already finished (it is then unchanged). */
  cancelled: boolean;
};

export interface Balance {
  /** Spendable tokens. */
  balance: number;
}

/** One entry of an error's `details`. */
export interface ErrorDetail {
  /** The offending field; genservice names a bad setting `settings.<name>`. */
  field: string;
  code: string;
  message: string;
}
