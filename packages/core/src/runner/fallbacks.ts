import { inject, injectable } from 'tsyringe';
import type { Settings } from '../domain/types.js';
import { ProviderError } from '../domain/errors.js';
import type { ModelProvider } from '../ports/provider.js';
import { ModelRegistry, type RegisteredModel } from '../domain/registry.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';

export type CircuitState = 'closed' | 'open' | 'half_open';

/**
 * One provider's circuit breaker. Closed: every run goes through; `failureThreshold` retryable failures in a row
 * open it. Open: the provider is unavailable until `openMs` have passed. Then half-open: one trial run goes through
 * (others still see it unavailable); its success closes the circuit, its failure opens it for another `openMs`.
 */
export class Circuit {
  private failures = 0;
  private openUntil = 0;
  private trial = false;
  private opened = false;

  constructor(
    private readonly threshold: number,
    private readonly openMs: number,
    /** The clock the circuit reads (the service's clock). */
    private readonly now: () => number,
  ) {}

  get state(): CircuitState {
    if (!this.opened) return 'closed';
    return this.now() < this.openUntil ? 'open' : 'half_open';
  }

  /** Whether a run may use the provider now; in half-open, true once (the trial) until that run reports. */
  tryAcquire(): boolean {
    const state = this.state;
    if (state === 'closed') return true;
    if (state === 'open' || this.trial) return false;
    this.trial = true;
    return true;
  }

  /** A run that took the half-open trial ended without a verdict (aborted, or a non-retryable error): free it. */
  release(): void {
    this.trial = false;
  }

  succeeded(): void {
    this.failures = 0;
    this.opened = false;
    this.trial = false;
  }

  failed(): void {
    if (this.opened) {
      // A half-open trial failed (or a run that started before it opened): open again for a full period.
      this.trial = false;
      this.openUntil = this.now() + this.openMs;
      return;
    }
    this.failures++;
    if (this.failures >= this.threshold) {
      this.opened = true;
      this.openUntil = this.now() + this.openMs;
    }
  }
}

/** A model a generation may run on, with the settings as that model validated them. */
export interface Candidate {
  model: RegisteredModel;
  settings: Settings;
  /** True for a fallback (not the generation's own model). */
  fallback: boolean;
}

/**
 * The fallback rules, asked by the runner: which models a generation may run on and in which order (its own model,
 * then its `fallbacks`, skipping those whose provider's circuit is open or whose settings validation refuses the
 * generation's settings), which failures move it on to the next one (a retryable ProviderError after all attempts),
 * and each provider's circuit. What a fallback is charged is the domain's rule (`completionCharge`, asked by the Lifecycle).
 */
@injectable()
export class Fallbacks {
  private readonly circuits = new Map<ModelProvider, Circuit>();
  /** The clock of the circuits: the service's clock (tests move a fake one). */
  now: () => number = () => this.options.clock.now();

  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(ModelRegistry) private readonly registry: ModelRegistry,
  ) {}

  circuitOf(provider: ModelProvider): Circuit {
    let c = this.circuits.get(provider);
    if (!c) {
      const { failureThreshold, openMs } = this.options.runner.circuit;
      c = new Circuit(failureThreshold, openMs, () => this.now());
      this.circuits.set(provider, c);
    }
    return c;
  }

  /**
   * Runs `attempt` on the generation's own model, then on each fallback in turn while the one before failed
   * retryably (after its attempts). A candidate whose provider's circuit refuses it is skipped, as is a fallback whose
   * settings validation refuses the generation's settings; when every candidate was refused, the generation's own
   * model is tried anyway rather than failing untried. A model without fallbacks is simply run, without an async
   * frame or a circuit asked (issue 36). The candidate that served is the one whose `attempt` resolved.
   */
  run<T>(model: RegisteredModel, settings: Settings, attempt: (c: Candidate) => Promise<T>, aborted: () => boolean): Promise<T> {
    const own: Candidate = { model, settings, fallback: false };
    if (model.fallbacks.length === 0) return attempt(own);
    return this.inTurn(own, attempt, aborted);
  }

  /** The candidates in turn: the own model, then each fallback whose settings validation takes the settings. */
  private async inTurn<T>(own: Candidate, attempt: (c: Candidate) => Promise<T>, aborted: () => boolean): Promise<T> {
    const { model, settings } = own;
    const list: Candidate[] = [own];
    for (const id of model.fallbacks) {
      const f = this.registry.get(id);
      const checked = f?.validate(settings);
      if (f && checked?.ok) list.push({ model: f, settings: checked.value, fallback: true });
    }
    let lastError: unknown;
    let tried = false;
    for (const c of list) {
      const circuit = this.circuitOf(c.model.provider);
      if (!circuit.tryAcquire()) continue;
      tried = true;
      try {
        return await attempt(c);
      } catch (err) {
        if (aborted() || !this.fallsBack(err)) throw err;
        lastError = err;
      } finally {
        circuit.release();
      }
    }
    if (!tried) return attempt(own);
    throw lastError;
  }

  /** Whether a run that threw `err` (after its attempts) moves on to the next candidate. */
  fallsBack(err: unknown): boolean {
    return err instanceof ProviderError && err.retryable;
  }

  /** An attempt on `model`'s provider failed retryably. */
  failed(model: RegisteredModel): void {
    this.circuitOf(model.provider).failed();
  }

  succeeded(model: RegisteredModel): void {
    this.circuitOf(model.provider).succeeded();
  }
}
