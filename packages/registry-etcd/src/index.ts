// Public entry of @leaf/registry-etcd: worker ids for snowflake generators from etcd v3.
export {
  EtcdRegistry,
  type EtcdRegistryOptions,
  type EtcdRegistrySettings,
} from "./etcd-registry";
