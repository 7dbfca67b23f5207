import { APICallError, InvalidArgumentError, LoadAPIKeyError, UnsupportedFunctionalityError } from '@ai-sdk/provider';
import { OutboundError, ProviderError } from '@genservice/core/ports';

/**
 * Removes from a provider's error text what must not reach an end user: URLs (signed ones carry tokens), bearer
 * tokens, things shaped like API keys (`sk-...`, `r8_...`, `Key ...`, long random strings), and cuts it short.
 */
export function redactSecrets(text: string, maxLength = 300): string {
  const cleaned = text
    .replace(/\bhttps?:\/\/\S+/gi, '[url]')
    .replace(/\b(bearer|basic)\s+[^\s,;'"]+/gi, '$1 [redacted]')
    .replace(/\b(api[_-]?key|key|token|secret|password)(\s*[:=]\s*)[^\s,;'"]+/gi, '$1$2[redacted]')
    .replace(/\b(sk|pk|rk|r8|fal|ak|xai|gsk)[-_][\w\-*.]{4,}/gi, '[redacted]')
    .replace(/[\w\-+/=]{32,}/g, '[redacted]')
    .replace(/\s+/g, ' ')
    .trim();
  return cleaned.length > maxLength ? `${cleaned.slice(0, maxLength - 1)}…` : cleaned;
}

function describeUrl(raw: string): string {
  try {
    const url = new URL(raw);
    return `${url.protocol}//${url.host}${url.pathname}`;
  } catch {
    return '(no url)';
  }
}

/** The OutboundError in an error's cause chain: a request the guarded fetch refused or could not make. */
function outboundIn(error: unknown): OutboundError | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 5 && current && typeof current === 'object'; depth++) {
    if (current instanceof OutboundError) return current;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/**
 * Turns what an AI SDK model threw into the ProviderError the runner understands:
 *
 * - `APICallError`: retryable exactly when the AI SDK says so (`isRetryable`: no answer, 408, 409, 429, 5xx); the
 *   public message names the status, and for a refused request (other 4xx) the provider's reason with secrets removed;
 *   never a reason for 401/403 (it may quote the key).
 * - A request the outbound guard refused or could not make (`createGuardedFetch`): retryable as the guard says.
 * - `InvalidArgumentError`, `UnsupportedFunctionalityError`: the settings cannot be used (`invalid_input`).
 * - `LoadAPIKeyError`: the host did not configure a key; anything else: not retryable, no public reason.
 */
export function toProviderError(error: unknown, modelId: string): ProviderError {
  if (error instanceof ProviderError) return error;
  if (APICallError.isInstance(error)) {
    const status = error.statusCode;
    const log = `${modelId}: ${error.message} (${status === undefined ? 'no answer' : `HTTP ${status}`} from ${describeUrl(error.url)})`;
    const outbound = outboundIn(error.cause);
    let publicMessage: string;
    if (outbound) publicMessage = `A request of the model provider was refused or failed (${outbound.code}).`;
    else if (status === undefined) publicMessage = 'The model provider could not be reached.';
    else if (status === 401 || status === 403) publicMessage = `The model provider refused the credentials of this service (HTTP ${status}).`;
    else if (status === 429) publicMessage = 'The model provider is rate limiting this service (HTTP 429).';
    else if (status >= 500) publicMessage = `The model provider failed (HTTP ${status}).`;
    else {
      const reason = redactSecrets(error.message);
      publicMessage = `The model provider refused the request (HTTP ${status})${reason ? `: ${reason}` : '.'}`;
    }
    return new ProviderError(log, { retryable: outbound ? outbound.retryable : error.isRetryable, publicMessage, cause: error });
  }
  const outbound = outboundIn(error);
  if (outbound) {
    return new ProviderError(`${modelId}: a request of the model provider failed: ${outbound.message}`, {
      retryable: outbound.retryable,
      publicMessage: `A request of the model provider was refused or failed (${outbound.code}).`,
      cause: error,
    });
  }
  if (InvalidArgumentError.isInstance(error) || UnsupportedFunctionalityError.isInstance(error)) {
    return new ProviderError(`${modelId}: ${error.message}`, {
      code: 'invalid_input',
      publicMessage: `The model cannot use these settings: ${redactSecrets(error.message)}`,
      cause: error,
    });
  }
  if (LoadAPIKeyError.isInstance(error)) {
    return new ProviderError(`${modelId}: ${error.message}`, { publicMessage: 'The model is not configured on this service.', cause: error });
  }
  return new ProviderError(`${modelId}: ${messageOf(error)}`, { cause: error });
}
