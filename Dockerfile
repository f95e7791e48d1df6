# Weft for GPU hosts: Node 22 + the Vulkan loader; Dawn (the `webgpu` package)
# drives the host's GPU through its Vulkan driver, which the NVIDIA container
# toolkit mounts into the container when the graphics capability is asked for
# (compute alone mounts CUDA, not Vulkan). See docs/deploy.md.
#
#   docker build -t weft .
#   docker run --gpus all -p 3000:3000 weft                 # weft serve
#   docker run --gpus all weft generate "Once upon a time"  # any weft subcommand
#
# The CPU-only variant (Mesa's software drivers) is Dockerfile.cpu.
# scripts/docker_lint.sh checks the package names below exist (CI runs it).

# ---- build: the same `npm run build` + `npm pack` a release makes ----
FROM node:22-bookworm-slim AS build
WORKDIR /src
ENV ONNXRUNTIME_NODE_INSTALL=skip
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund || npm install --no-audit --no-fund
COPY . .
RUN npm run build && npm pack --pack-destination /tmp && mv /tmp/weft-ai-weft-*.tgz /tmp/weft.tgz

# ---- runtime: the packed tarball installed without dev dependencies ----
FROM node:22-bookworm-slim
# apt: libvulkan1 ca-certificates
RUN apt-get update \
 && apt-get install -y --no-install-recommends libvulkan1 ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /tmp/weft.tgz /tmp/weft.tgz
RUN ONNXRUNTIME_NODE_INSTALL=skip npm install -g --omit=dev --no-audit --no-fund /tmp/weft.tgz \
 && rm /tmp/weft.tgz && npm cache clean --force

# The NVIDIA container toolkit reads these: every GPU, with the Vulkan
# (graphics) and compute driver libraries mounted.
ENV NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,graphics,utility \
    WEFT_HOST=0.0.0.0 \
    WEFT_BACKEND=native \
    HF_HOME=/data/huggingface
RUN mkdir -p /data/huggingface && chown node:node /data /data/huggingface
USER node
WORKDIR /home/node
# inference, management, vertex, openai, sagemaker (docs/configuration.md)
EXPOSE 3000 3001 3002 3003 8080
HEALTHCHECK --interval=15s --timeout=5s --start-period=120s --retries=3 \
  CMD node -e "fetch('http://127.0.0.1:'+(process.env.WEFT_PORT||3000)+'/health').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
# SageMaker starts a container as `docker run IMAGE serve`: the argument lands here.
ENTRYPOINT ["weft"]
CMD ["serve"]
