// The worker thread of ImageWorkerPool: runs image tasks off the main event loop, one message at a time.
import { parentPort } from 'node:worker_threads';
import { runImageTask, type ImageTask } from './image-tasks.js';

const port = parentPort;
if (port) {
  port.on('message', (message: { id: number; task: ImageTask }) => {
    try {
      const result = runImageTask(message.task);
      const bytes = result instanceof Uint8Array ? result : result.ok ? result.data : undefined;
      // The result's buffer moves to the main thread instead of being copied.
      port.postMessage({ id: message.id, result }, bytes ? [bytes.buffer as ArrayBuffer] : []);
    } catch (error) {
      port.postMessage({ id: message.id, error: error instanceof Error ? error.message : String(error) });
    }
  });
}
