/** Pure rules of batches: their size, and when one is done. */
import type { BatchCounts } from './types.js';

/** The most requests one batch may hold. */
export const MAX_BATCH_SIZE = 1000;

/** A batch is done once none of its generations is pending or processing. The one "batch done" rule. */
export function isBatchDone(counts: BatchCounts['counts']): boolean {
  return counts.pending + counts.processing === 0;
}
