import { runAuditLogContract, runCapacityContract, runPortContracts } from '@genservice/testing';
import { createSqliteStores } from '../src/index.js';
import { tempDir } from './helpers.js';

// A fresh file per test, in WAL mode with the production pragmas: the suite checks the real configuration.
runPortContracts('sqlite', async () => {
  const tmp = await tempDir();
  const stores = createSqliteStores({ filename: tmp.file() });
  return {
    ...stores,
    async close(): Promise<void> {
      await stores.close();
      await tmp.remove();
    },
  };
});

runAuditLogContract('sqlite', async () => {
  const tmp = await tempDir();
  const stores = createSqliteStores({ filename: tmp.file() });
  return {
    auditLog: stores.auditLog,
    async close(): Promise<void> {
      await stores.close();
      await tmp.remove();
    },
  };
});

// Two connections on one file: the second stands for another process.
runCapacityContract('sqlite', async () => {
  const tmp = await tempDir();
  const file = tmp.file();
  const stores = createSqliteStores({ filename: file });
  const other = createSqliteStores({ filename: file });
  return {
    capacity: stores.capacity,
    other: other.capacity,
    async close(): Promise<void> {
      await other.close();
      await stores.close();
      await tmp.remove();
    },
  };
});
