// flake-idgen ships no types: the part of its API the snowflake bench uses.
declare module "flake-idgen" {
  export default class FlakeId {
    constructor(options?: { id?: number; datacenter?: number; worker?: number; epoch?: number });
    next(): Buffer;
    next(callback: (error: Error | null, id: Buffer) => void): void;
  }
}
