"""OCI image archives, written byte for byte the same from the same inputs: zeroscaler's images
(`image/`) and the real node's own (`localcluster/`) are all written by `oci.archive`."""
