"""The cluster as both components see it: namespaces, RBAC, CRDs and discovery (`view`), the
policy ConfigMaps (`policy_watch`), one collection kept by list-then-watch (`informer`), Events
written (`events`), and access reviews asked (`access_reviews`)."""
