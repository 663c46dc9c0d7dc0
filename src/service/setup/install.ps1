# The tuner-agent installer for Windows, as the tuning service serves it at /install.ps1. In an
# elevated PowerShell (Run as administrator):
#   Invoke-WebRequest -UseBasicParsing <service>/install.ps1 -OutFile agent-installer.ps1
#   powershell -NoProfile -ExecutionPolicy Bypass -File agent-installer.ps1
# It downloads tuner-agent-windows-x64.exe, checks its SHA-256 against the SHA256SUMS written when
# the binaries were built, and installs it as %ProgramFiles%\tuner-agent\tuner-agent.exe. It makes
# %ProgramData%\tuner-agent, the agent's working directory (agent.yaml, its journal and lease),
# for Administrators and SYSTEM only, when it is not there yet. Windows PowerShell 5.1 or
# PowerShell 7, on x64 Windows 10, Windows Server 2016 or later (what Node 24 runs on).
# This file is ASCII: Windows PowerShell 5.1 reads a script without a byte order mark in the
# system's code page.
#Requires -Version 5.1
Set-StrictMode -Version 3.0
$ErrorActionPreference = 'Stop'
# Windows PowerShell 5.1 draws a progress bar for every block it downloads, which slows it down.
$ProgressPreference = 'SilentlyContinue'

$ServiceUrl = __SERVICE_URL__
$Downloads = "$ServiceUrl/downloads"
$Name = '__BINARY_NAME__'
$InstallDir = Join-Path $env:ProgramFiles 'tuner-agent'
$StateDir = Join-Path $env:ProgramData 'tuner-agent'
$Target = Join-Path $InstallDir 'tuner-agent.exe'
$Partial = Join-Path $InstallDir ".tuner-agent.download.$PID"

function Fail([string]$Message) {
  [Console]::Error.WriteLine("tuner-agent installer: $Message")
  exit 1
}

# A 32-bit PowerShell on 64-bit Windows sees x86 in PROCESSOR_ARCHITECTURE; PROCESSOR_ARCHITEW6432
# then has the machine's own.
$machine = $env:PROCESSOR_ARCHITECTURE
if ($env:PROCESSOR_ARCHITEW6432) { $machine = $env:PROCESSOR_ARCHITEW6432 }
$emulated = ''
if ($machine -eq 'ARM64') {
  # Windows 11 on Arm runs x64 programs under emulation; Windows 10 on Arm does not.
  $emulated = ' under x64 emulation'
} elseif ($machine -ne 'AMD64') {
  Fail "this processor ($machine) has no tuner-agent binary; run the agent as a container instead (see the setup page at $ServiceUrl)"
}
if ([Environment]::OSVersion.Version.Major -lt 10) {
  Fail "Node 24, which tuner-agent carries, needs Windows 10, Windows Server 2016 or later (this is $([Environment]::OSVersion.VersionString))"
}
$principal = New-Object Security.Principal.WindowsPrincipal([Security.Principal.WindowsIdentity]::GetCurrent())
if (-not $principal.IsInRole([Security.Principal.WindowsBuiltInRole]::Administrator)) {
  Fail "it installs into $InstallDir, which needs an elevated PowerShell: open one with Run as administrator and run this installer again"
}
if ($PSVersionTable.PSVersion.Major -lt 6) {
  # Windows PowerShell 5.1 may offer only TLS 1.0 and 1.1, which HTTPS servers refuse today.
  [Net.ServicePointManager]::SecurityProtocol = [Net.ServicePointManager]::SecurityProtocol -bor [Net.SecurityProtocolType]::Tls12
}

try {
  $sums = (Invoke-WebRequest -UseBasicParsing -Uri "$Downloads/SHA256SUMS").Content
} catch {
  Fail "cannot read $Downloads/SHA256SUMS ($($_.Exception.Message)): is the tuning service reachable from this host?"
}
if ($sums -is [byte[]]) { $sums = [Text.Encoding]::UTF8.GetString($sums) }
$expected = $null
$offered = @()
foreach ($line in ($sums -split "`n")) {
  # A line as sha256sum writes it: the hash, a space, a space or a star, the file name.
  if ($line.Trim() -cmatch '^([0-9a-f]{64}) [ *](tuner-agent-[a-z0-9]+-[a-z0-9]+(\.exe)?)$') {
    $offered += $Matches[2]
    if ($Matches[2] -ceq $Name) { $expected = $Matches[1] }
  }
}
if (-not $expected) {
  Fail "the tuning service has no tuner-agent for Windows (it offers: $($offered -join ' ')); run the agent as a container instead (see the setup page at $ServiceUrl)"
}

New-Item -ItemType Directory -Force -Path $InstallDir | Out-Null
Write-Output "downloading $Name from $Downloads"
try {
  Invoke-WebRequest -UseBasicParsing -Uri "$Downloads/$Name" -OutFile $Partial
} catch {
  Remove-Item -Force -ErrorAction SilentlyContinue -LiteralPath $Partial
  Fail "the download of $Downloads/$Name failed: $($_.Exception.Message)"
}
$actual = (Get-FileHash -Algorithm SHA256 -LiteralPath $Partial).Hash.ToLowerInvariant()
if ($actual -ne $expected) {
  Remove-Item -Force -LiteralPath $Partial
  Fail "the download does not match SHA256SUMS (expected $expected, got $actual): deleted it, nothing was installed"
}
try {
  Move-Item -Force -LiteralPath $Partial -Destination $Target
} catch {
  Remove-Item -Force -ErrorAction SilentlyContinue -LiteralPath $Partial
  Fail "cannot replace $Target ($($_.Exception.Message)): if the agent runs as a service, stop it first (Stop-Service tuner-agent), then run this installer again"
}

if (-not (Test-Path -LiteralPath $StateDir)) {
  New-Item -ItemType Directory -Path $StateDir | Out-Null
  # agent.yaml holds the API key and the database password. The groups by their SIDs
  # (Administrators, SYSTEM), which are the same in every language of Windows.
  & icacls.exe $StateDir /inheritance:r /grant:r '*S-1-5-32-544:(OI)(CI)F' '*S-1-5-18:(OI)(CI)F' | Out-Null
  if ($LASTEXITCODE -ne 0) { Fail "made $StateDir but could not limit it to Administrators and SYSTEM (icacls exit $LASTEXITCODE)" }
}

# Its own answer, or why it did not start; the installation stands either way.
$ErrorActionPreference = 'Continue'
try {
  $version = (& $Target --version 2>&1 | Out-String).Trim()
  if ($LASTEXITCODE -ne 0) { Write-Warning "$Target --version failed on this host: $version" }
} catch {
  $version = 'did not start'
  Write-Warning "$Target did not start on this host: $($_.Exception.Message)"
}
$ErrorActionPreference = 'Stop'

Write-Output @"

installed $Target ($version, windows-x64$emulated), its SHA-256 checked against SHA256SUMS

Next steps:
  1. Put agent.yaml in $StateDir, the agent's working directory, where it also
     keeps its journal: copy it from the agent setup page of your database at
     $ServiceUrl
  2. Check every prerequisite (each FAIL says how to fix it):
       cd '$StateDir'
       & '$Target' --__FIRST_TARGET__ --check
     (or __OTHER_TARGETS__: the target of your database)
  3. Run it as a Windows service that restarts when it fails: see "Windows" in docs/install.md of tuner.
"@
