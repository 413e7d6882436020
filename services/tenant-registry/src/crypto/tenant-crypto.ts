import { HostSyncHasher } from './host-sync-hasher';
import { jwtSecretAad, SecretBox } from './secret-box';

/** Everything the store does with SECRETS_KEY, in one place. */
export class TenantCrypto {
  private readonly box: SecretBox;
  readonly hostSync: HostSyncHasher;

  constructor(secretsKey: Buffer) {
    this.box = new SecretBox(secretsKey);
    this.hostSync = new HostSyncHasher(secretsKey);
  }

  sealJwtSecret(tenantId: string, keyVersion: number, secret: string): string {
    return this.box.seal(secret, jwtSecretAad(tenantId, keyVersion));
  }

  openJwtSecret(tenantId: string, keyVersion: number, sealed: string): string {
    return this.box.open(sealed, jwtSecretAad(tenantId, keyVersion));
  }
}
