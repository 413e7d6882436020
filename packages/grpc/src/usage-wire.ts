/** relay.registry.v1.Usage messages as proto-loader gives them (int64 as numbers). */
export interface UsageRefusalMessage {
  limit: string;
  count: number;
}

export interface UsageRowMessage {
  tenant_id: string;
  hour_ms: number;
  published_rest: number;
  published_ws: number;
  published_host: number;
  deliveries: number;
  bytes_in: number;
  bytes_out: number;
  peak_connections: number;
  connection_ms: number;
  refusals: UsageRefusalMessage[];
}

export interface UsageFlushRequest {
  flush_id: string;
  instance_id: string;
  rows: UsageRowMessage[];
}

export interface UsageFlushResponse {
  duplicate: boolean;
}
