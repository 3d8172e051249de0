#!/usr/bin/env bash
# Installs everything the test suite needs on a fresh Debian 12 machine:
# Debian packages (tshark oracle, DPDK for the dpdk feature and dpdk-test-acl, Prometheus,
# libclang for bindgen, systemd for scripts/ci-deploy.sh's systemd-analyze, Hyperscan as the
# pattern-matching peer and oracle, nfdump's nfcapd as the IPFIX collector) and the pinned
# CUDA 13.0 compiler parts from PyPI that compile every kernel without a GPU.
# Idempotent; safe to run again.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
need_apt=0
for p in tshark dpdk-dev libdpdk-dev prometheus libclang-dev pkg-config clang \
  librte-net-pcap23 librte-net-memif23 librte-net-af-xdp23 librte-net-tap23 iproute2 systemd \
  libhyperscan-dev nfdump; do
  dpkg -s "$p" >/dev/null 2>&1 || need_apt=1
done
if [ "$need_apt" = 1 ]; then
  apt-get update -qq
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
  apt-get install -y -qq --no-install-recommends tshark dpdk-dev libdpdk-dev prometheus \
    libclang-dev clang pkg-config python3-pip \
    librte-net-pcap23 librte-net-memif23 librte-net-af-xdp23 librte-net-tap23 iproute2 \
    systemd libhyperscan-dev nfdump >/dev/null
fi
# Pinned NVRTC/nvcc 13.0.x: newer ones emit PTX the GPU machine's driver (CUDA 13.0) cannot load.
PY=${PYTHON:-python3}
if ! "$PY" -c 'import nvidia.cu13' >/dev/null 2>&1 || [ ! -e "$("$PY" -c 'import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))')/nvidia/cu13/bin/nvcc" ]; then
  "$PY" -m pip install -q --disable-pip-version-check \
    nvidia-cuda-nvrtc==13.0.88 nvidia-cuda-nvcc==13.0.88 nvidia-nvvm==13.0.88 \
    nvidia-cuda-crt==13.0.88 nvidia-cuda-runtime==13.0.96
fi
# nvdisasm beside nvcc (scripts/check-order-sass.sh reads the flow-table probe's SASS); the
# oldest on the registry, it reads sm_90 code of nvcc 13.0.
NVBIN=$("$PY" -c 'import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))')/nvidia/cu13/bin
if [ ! -x "$NVBIN/nvdisasm" ]; then
  "$PY" -m pip install -q --disable-pip-version-check nvidia-cuda-nvdisasm==13.2.86
fi
# Offline Kubernetes schema validation of deploy/kubernetes (scripts/ci-deploy.sh; brings PyYAML, jsonschema).
"$PY" -c 'import kubernetes_validate as k; assert k.__version__ == "1.37.0"' 2>/dev/null || "$PY" -m pip install -q --disable-pip-version-check kubernetes-validate==1.37.0
