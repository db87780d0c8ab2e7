# zeroscaler's image for builders with a Docker-compatible engine and a registry. The first stage
# runs the project's own image builder (`python -m image rootfs`): the same pinned Debian packages
# and locked wheels as `make image`, so the result has the same layout, entry points and user.
# The build stage's base image only provides apt, dpkg and pip; nothing of it reaches the image.
FROM debian:bookworm-slim AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-pip ca-certificates \
 && rm -rf /var/lib/apt/lists/partial
# pip installs into the image's directory (--target), never into this stage's system Python.
ENV PIP_BREAK_SYSTEM_PACKAGES=1 PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
COPY pyproject.toml ./
COPY image ./image
COPY oci ./oci
COPY zeroscaler ./zeroscaler
COPY webhook ./webhook
COPY controller ./controller
COPY certs ./certs
RUN python3 -m image rootfs /rootfs

FROM scratch
COPY --from=build /rootfs /
USER 65532:65532
ENV PATH=/usr/local/bin:/usr/bin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/home/nonroot
WORKDIR /
LABEL org.opencontainers.image.title=zeroscaler \
      org.opencontainers.image.version=0.1.0 \
      org.opencontainers.image.licenses=Apache-2.0
# The chart runs zeroscaler-controller, zeroscaler-webhook and zeroscaler (certs) as commands.
CMD ["zeroscaler", "--help"]
