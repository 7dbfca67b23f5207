import { type Span, trace } from '@opentelemetry/api';
import { inject, injectable } from 'tsyringe';
import type { BatchCounts, FailureCode, GenerationRecord } from '../domain/types.js';
import { childLogger, silentLogger } from '../logger.js';
import type { Logger } from '../ports/logger.js';
import { currentRequestContext } from '../request-context.js';
import { Telemetry, traceparentOf } from '../telemetry.js';
import { TOKENS } from '../tokens.js';
import { RecentFailures } from './recent-failures.js';

/**
 * What operators see of the life of generations: for each step (created, started, finished, batch created and
 * completed, deleted) its metric and its log line, decided here once. The Lifecycle and its helpers report steps and
 * never build a metric or a log line themselves (the metrics are `Telemetry`'s instruments; the lines carry
 * `component: lifecycle`).
 */
@injectable()
export class LifecycleObserver {
  private readonly logger: Logger;
  /** False with the default silent logger: the per-generation log lines are then not even built. */
  private readonly logs: boolean;

  constructor(
    @inject(Telemetry) private readonly telemetry: Telemetry,
    @inject(TOKENS.Logger) logger: Logger,
    @inject(RecentFailures) private readonly recentFailures: RecentFailures,
  ) {
    this.logger = childLogger(logger, { component: 'lifecycle' });
    this.logs = this.logger !== silentLogger;
  }

  /**
   * Runs a create in its span: a child of the client's `traceparent` (or of the active span). `fn` is given the
   * span's own traceparent, which is stored with the generation, so the run continues this trace wherever it runs.
   */
  creating<T>(modelId: string, fn: (traceparent: string | undefined, span: Span) => Promise<T>): Promise<T> {
    const parent = currentRequestContext()?.traceContext;
    return this.telemetry.inSpan(
      'genservice.create',
      { 'genservice.model': modelId },
      (span) => {
        const sc = span.spanContext();
        return fn(trace.isSpanContextValid(sc) ? traceparentOf(sc) : undefined, span);
      },
      parent,
    );
  }

  created(gen: { id: string; modelId: string; ownerId: string; reserved: number }): void {
    this.telemetry.generationCreated(gen.modelId);
    if (this.logs) this.logger.info({ generationId: gen.id, modelId: gen.modelId, userId: gen.ownerId, status: 'pending', reserved: gen.reserved }, 'generation created');
  }

  batchCreated(batchId: string, userId: string, size: number, reserved: number): void {
    if (this.logs) this.logger.info({ batchId, userId, size, reserved }, 'batch created');
  }

  /** A first claim: how long it waited in the queue. */
  started(rec: GenerationRecord, now: number): void {
    this.telemetry.runStarted(rec.modelId, now - rec.createdAt);
  }

  /** Answers true: the completion it was told of stands (so a promise chain can end on it). */
  completed(rec: GenerationRecord, price: number, now: number): true {
    this.telemetry.generationFinished(rec.modelId, 'completed', '', price, rec.startedAt === undefined ? undefined : now - rec.startedAt);
    if (this.logs) this.logger.info({ generationId: rec.id, status: 'completed', price }, 'generation completed');
    return true;
  }

  failed(rec: GenerationRecord, price: number, code: FailureCode, reason: string, now: number): void {
    this.recentFailures.record(now);
    this.telemetry.generationFinished(rec.modelId, 'failed', code, price, rec.startedAt === undefined ? undefined : now - rec.startedAt);
    this.logger.info({ generationId: rec.id, status: 'failed', price, code, reason }, 'generation failed');
  }

  batchCompleted(batchId: string, totals: BatchCounts): void {
    if (this.logs) this.logger.info({ batchId, counts: totals.counts, price: totals.price }, 'batch completed');
  }

  deleted(rec: GenerationRecord): void {
    if (this.logs) this.logger.info({ generationId: rec.id, status: rec.status }, 'generation deleted');
  }
}
